from fractions import Fraction

from servelab.planner.dtypes import kv_element_bytes, weight_bits


def test_gguf_block_formats_include_their_scales():
    assert weight_bits("Q4_0") == Fraction(9, 2)
    assert weight_bits("q4_1") == 5
    assert weight_bits("Q8_0") == Fraction(17, 2)
    assert weight_bits("Q6_K") == Fraction(210 * 8, 256)


def test_awq_carries_a_scale_and_zero_per_group_of_128():
    assert weight_bits("AWQ") == 4 + Fraction(20, 128)


def test_unknown_names_are_none():
    assert weight_bits("q3_xyz") is None
    assert kv_element_bytes("int3", 2) is None


def test_auto_kv_follows_the_model_dtype():
    assert kv_element_bytes("auto", 2) == 2
    assert kv_element_bytes("fp8_e4m3", 2) == 1
    assert kv_element_bytes("q8_0", 2) == Fraction(34, 32)
