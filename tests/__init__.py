import pytest

# The shared helpers' asserts report the values they compared, as they did inside the test files
# they came from (pytest rewrites test files and conftest.py files, and a module named here).
pytest.register_assert_rewrite("tests.helpers")
