"""``python -m tlstm_bench``: the same command line as ``tlstm-bench``."""

from .cli import main

if __name__ == "__main__":
    main()
