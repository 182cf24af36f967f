"""The toolkit where numpy is missing: the vectors part is skipped, naming the extra
that installs numpy, instead of failing. (``memvault[testing]`` installs numpy, since
the default capabilities include ``vectors``; without it a third party's vectors
tests failed: 12 on memory://, 17 on SQLite.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from memvault.testing import VectorsContract

ROOT = Path(__file__).parents[2]

NO_NUMPY = """
import sys

sys.modules["numpy"] = None  # import numpy raises ImportError, as where it is not installed
"""

SUITE = """
import pytest

from memvault.testing import VectorsContract


class TestMemoryVectors(VectorsContract):
    capabilities = frozenset({"ttl", "vectors"})

    @pytest.fixture
    def store_url(self):
        return "memory://"
"""


def test_the_vectors_part_skips_without_numpy_naming_the_extra(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(NO_NUMPY)
    pytester.makepyfile(test_vectors=SUITE)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q", "-rs")
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.OK, out[-3000:]
    skipped = int(re.search(r"(\d+) skipped", out).group(1))  # type: ignore[union-attr]
    assert skipped == len([n for n in dir(VectorsContract) if n.startswith("test_")])
    assert "failed" not in out
    reasons = re.findall(r"SKIPPED \[\d+\] .*", out)
    assert reasons and all("pip install 'memvault[testing]'" in r for r in reasons), reasons


def test_the_testing_extra_installs_numpy() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text("utf-8")
    testing = re.search(r"^testing = \[(.*)\]", pyproject, re.M)
    assert testing and re.search(r'"numpy\b', testing.group(1)), testing
