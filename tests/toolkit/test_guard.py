"""The contract guard: deleting or silently overriding a contract test fails the run."""

from __future__ import annotations

import pytest

from memvault.testing import WritesContract

# Every contract test but the guard is deselected by ``-k contract_guard``.
CONTRACT_TESTS = sum(1 for name in dir(WritesContract) if name.startswith("test_"))

HEADER = """
import pytest
from memvault.testing import WritesContract

class TestMine(WritesContract):
    capabilities = frozenset({CAPS})

    @pytest.fixture
    def store_url(self):
        return "memory://"
"""


def run_guard(pytester: pytest.Pytester, body: str, caps: str = '"ttl"') -> pytest.RunResult:
    pytester.makepyfile(test_mine=HEADER.replace("CAPS", caps) + body)
    return pytester.runpytest("-k", "contract_guard", "-p", "no:cacheprovider")


def test_untouched_subclass_passes_the_guard(pytester: pytest.Pytester) -> None:
    result = run_guard(pytester, "")
    result.assert_outcomes(passed=1, deselected=CONTRACT_TESTS)


def test_deleted_test_fails_the_guard(pytester: pytest.Pytester) -> None:
    result = run_guard(pytester, "    test_batch_is_atomic_and_adjacent = None\n")
    result.assert_outcomes(failed=1, deselected=CONTRACT_TESTS - 1)
    result.stdout.fnmatch_lines(["*test_batch_is_atomic_and_adjacent: deleted*"])


def test_override_without_xfail_fails_the_guard(pytester: pytest.Pytester) -> None:
    result = run_guard(
        pytester,
        """
    @pytest.mark.skip(reason="flaky on our server")
    def test_batch_is_atomic_and_adjacent(self, store):
        pass
""",
    )
    result.assert_outcomes(failed=1, deselected=CONTRACT_TESTS)
    result.stdout.fnmatch_lines(["*test_batch_is_atomic_and_adjacent: overridden without*"])


def test_override_with_xfail_reason_passes_the_guard(pytester: pytest.Pytester) -> None:
    result = run_guard(
        pytester,
        """
    @pytest.mark.xfail(reason="our server caps batches at 50 messages", strict=True)
    def test_batch_is_atomic_and_adjacent(self, store):
        assert False
""",
    )
    result.assert_outcomes(passed=1, deselected=CONTRACT_TESTS)


def test_xfail_without_reason_fails_the_guard(pytester: pytest.Pytester) -> None:
    result = run_guard(
        pytester,
        """
    @pytest.mark.xfail
    def test_batch_is_atomic_and_adjacent(self, store):
        assert False
""",
    )
    result.assert_outcomes(failed=1, deselected=CONTRACT_TESTS)


def test_unknown_capability_fails_the_guard(pytester: pytest.Pytester) -> None:
    result = run_guard(pytester, "", caps='"ttl", "multiproces"')
    result.assert_outcomes(failed=1, deselected=CONTRACT_TESTS)
    result.stdout.fnmatch_lines(["*'multiproces' is not one of*"])


def test_missing_capability_skips_with_its_name(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_mine="""
import pytest
from memvault.testing import DurabilityContract

class TestMine(DurabilityContract):
    capabilities = frozenset()

    @pytest.fixture
    def store_url(self):
        return "memory://"
"""
    )
    result = pytester.runpytest("-rs", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, skipped=2)  # a closed store refuses: no capability
    result.stdout.fnmatch_lines(["*the backend declares no 'persistent' capability*"])


def test_every_contract_test_says_what_a_failure_means() -> None:
    """A failing contract test must tell a backend author what broke."""
    from memvault.testing import AsyncStoreContract
    from memvault.testing.guard import contract_tests

    vague = [
        name
        for name, func in contract_tests(AsyncStoreContract).items()
        if "Failing" not in (func.__doc__ or "")
    ]
    assert vague == []


def test_tests_picked_by_node_id_run_without_the_guard(pytester: pytest.Pytester) -> None:
    """Rerunning one test (or a mutation tool running a few) is not a certification:
    the guard stays out instead of reporting the rest as not collected."""
    pytester.makepyfile(test_mine=HEADER.replace("CAPS", '"ttl"'))
    result = pytester.runpytest(
        "test_mine.py::TestMine::test_batch_is_atomic_and_adjacent", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=1)
