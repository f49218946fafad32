"""Solutions to the notebooks' exercises and their self-checks, one module per notebook
(``tpucost.solutions.nb04``, ...), graded the same way (`tpucost.solutions.grading`).

They live in the package, not in the notebooks, so the tests run every solution and every check
(``tests/test_exercises.py``: each check passes the solution's answer and fails a wrong one), and
neither can silently stop working.
"""
