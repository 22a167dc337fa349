"""AttentionOptions, the implementation choice, the CLI's option declarations
and its one table of exit codes."""

import numpy as np
import pytest

from attncli import AttentionOptions, attention, attention_steps
from attncli.errors import AttnError, CheckFailed, ShapeError, UsageError

from reference import attention as reference

RNG = np.random.default_rng(7)
Q, K, V = RNG.normal(size=(5, 4)), RNG.normal(size=(7, 4)), RNG.normal(size=(7, 3))


@pytest.mark.parametrize(
    "options, expected",
    [
        (AttentionOptions(), dict()),
        (AttentionOptions(scale=0.3, temperature=2.0), dict(scale=0.3, temperature=2.0)),
        (AttentionOptions(causal="top-left"), dict(causal="top-left")),
        (AttentionOptions(causal="bottom-right"), dict(causal="bottom-right")),
        (AttentionOptions(mask=np.arange(7) % 2 == 0), dict(allowed=np.tile(np.arange(7) % 2 == 0, (5, 1)))),
        (AttentionOptions(bias=np.linspace(-1, 1, 35).reshape(5, 7)), dict(bias=np.linspace(-1, 1, 35).reshape(5, 7))),
    ],
)
@pytest.mark.parametrize("implementation", ["reference", "blocked"])
def test_every_implementation_matches_the_loop(options, expected, implementation):
    out, weights = attention(Q, K, V, options, implementation=implementation)
    ref_out, ref_weights = reference(Q, K, V, **expected)
    np.testing.assert_allclose(out, ref_out, atol=1e-12)
    if implementation == "reference":
        np.testing.assert_allclose(weights, ref_weights, atol=1e-12)
    else:
        assert weights is None  # the kernel never holds the weights


def test_keywords_are_the_same_options():
    mask = np.array([[1.0, 0, 1, 1, 0, 1, 1]])
    by_keywords = attention_steps(Q, K, V, causal=True, mask=mask, temperature=3.0)
    by_options = attention_steps(Q, K, V, AttentionOptions(causal="top-left", mask=mask.astype(bool), temperature=3.0))
    np.testing.assert_array_equal(by_keywords.weights, by_options.weights)


def test_options_and_keywords_together_are_refused():
    with pytest.raises(UsageError, match="not both"):
        attention(Q, K, V, AttentionOptions(), scale=1.0)


@pytest.mark.parametrize(
    "settings, message",
    [
        (dict(similarity="euclid"), "unknown similarity 'euclid'"),
        (dict(causal="middle"), "unknown causal alignment 'middle'"),
        (dict(scale=-1.0), "scale must be a positive finite number"),
        (dict(temperature=float("inf")), "temperature must be a positive finite number"),
        (dict(mask=np.ones((5, 7))), "a mask must be boolean"),
        (dict(bias=np.array([[np.nan]])), "not NaN or \\+inf"),
    ],
)
def test_bad_options_are_refused(settings, message):
    with pytest.raises(AttnError, match=message):
        AttentionOptions(**settings)


def test_unknown_implementation():
    with pytest.raises(UsageError, match="unknown implementation 'fast'"):
        attention(Q, K, V, implementation="fast")


def test_the_scale_in_force():
    assert AttentionOptions().scale_for(16) == 0.25
    assert AttentionOptions(similarity="cosine").scale_for(16) == 1.0
    assert AttentionOptions(scale=2.0, similarity="cosine").scale_for(16) == 2.0


def test_every_attention_command_declares_the_options_once():
    """run, explain and self take every attention option; lookup the three that
    make sense for words; each from the one declaration in cli/attention.py."""
    import inspect

    from attncli.cli.attention import ATTENTION_OPTIONS
    from attncli.cli.commands import check, explain, lookup, run, selfattn

    for command in (run.run, explain.explain, selfattn.self_attention, check.check):
        assert set(ATTENTION_OPTIONS) <= set(inspect.signature(command).parameters)
    lookup_params = set(inspect.signature(lookup.lookup).parameters)
    assert {"scale", "temperature", "similarity"} <= lookup_params and "mask" not in lookup_params


@pytest.mark.parametrize(
    "error, code",
    [
        (AttnError("x"), 1),
        (ShapeError("x"), 1),
        (UsageError("x"), 2),
        (CheckFailed("x"), 3),
    ],
)
def test_one_table_of_exit_codes(error, code):
    from attncli.cli.app import exit_code

    assert exit_code(error) == code
    assert not hasattr(error, "exit_code")  # the library's errors carry no exit codes
