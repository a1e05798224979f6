"""``python -m pynamodb_unique.cli``: the ``pynamodb-unique`` command."""

from . import main

if __name__ == "__main__":
    main()
