"""``tlstm-bench data download enwik8|mnist --data-dir D``: fetch and check the data files."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .app import app, console, handles_user_errors

data_app = typer.Typer(help="Fetch the data files of the enwik8 and MNIST tasks (online users).",
                       no_args_is_help=True)
app.add_typer(data_app, name="data")


@data_app.command("download")
@handles_user_errors
def download_cmd(
    dataset: Annotated[str, typer.Argument(help="What to fetch: enwik8 or mnist.")],
    data_dir: Annotated[Path, typer.Option(help="Where to put the files (created if missing).")] = Path("data"),
    force: Annotated[bool, typer.Option("--force", help="Fetch again even if a checked copy is there.")] = False,
) -> None:
    """Download the files, check their size and md5, and say where they are."""
    from ..checks import output_dir
    from ..tasks.download import download  # torch-free CLI start-up: import the core here

    output_dir(data_dir, "--data-dir")  # before any download
    for path in download(dataset, data_dir, force=force, log=console.print):
        console.print(f"ok: {path}", highlight=False)
    console.print(f"train with --data-dir {data_dir}", highlight=False)
