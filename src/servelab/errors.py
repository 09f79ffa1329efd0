"""One exception tree for failures of the tool itself.

A failed *request* is never an exception: it is data (``RequestRecord.error``).
These are for the tool: bad input, an engine that will not start, a server that
is not there. The CLI turns any of them into one line on stderr and exit 2.

    ServelabError
    ├── InputError          bad flag, file, field or combination (names it)
    │   ├── DatasetError    dataset missing, malformed, or empty after filtering
    │   └── TokenizerError  tokenizer not found locally or unreadable
    ├── ServerError         the endpoint is unreachable, not ready in time, or answers
    │                       in a form we cannot read (e.g. malformed /metrics)
    └── EngineError         an engine failed to start, died, or would not stop
"""


class ServelabError(Exception):
    """Base of every error servelab raises on purpose."""

    exit_code = 2


class InputError(ServelabError):
    """The user gave something we cannot use; the message names it."""


class DatasetError(InputError):
    """A dataset file is missing, malformed, or yields no requests."""


class TokenizerError(InputError):
    """A tokenizer cannot be resolved locally or cannot be loaded."""


class ServerError(ServelabError):
    """The server under test is unreachable, never became ready, or answered unreadably."""


class EngineError(ServelabError):
    """An engine process failed to start, died, or could not be stopped."""
