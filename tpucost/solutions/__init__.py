"""Solutions to the notebooks' exercises, one module per notebook (``tpucost.solutions.nb04``, ...).

They live in the package, not in the notebooks, so the tests run every one of them
(``tests/test_solutions.py``) and a solution cannot silently stop working.
"""
