"""Files people have that attn does not read: spreadsheets, dataframes,
HDF5, MATLAB, pickles and PyTorch checkpoints. Each is recognised by its
extension or its first bytes and refused in one line that says how to save
the numbers in a format attn reads, rather than failing later with a
misleading error ("not a number", "not a readable NPZ archive").

Adding one is a line in ``FOREIGN``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from attncli.errors import AttnError

EXCEL_HOW = "save the sheet as CSV (Excel: File > Save As > CSV UTF-8), or with pandas: read_excel(f).to_csv(...)"


@dataclass(frozen=True)
class Foreign:
    """A format attn recognises in order to refuse it helpfully."""

    what: str  # "an Excel workbook"
    extensions: tuple[str, ...]  # lowercase, with the dot
    how: str  # how to save its numbers so that attn reads them
    magic: tuple[bytes, ...] = ()  # first bytes that mark it, whatever the name
    recognise: Callable[[bytes], bool] | None = None  # for containers whose first bytes are shared (zip)


def _zip_names(data: bytes) -> list[str]:
    """The member names of a zip archive (empty when it is not one or is damaged)."""
    if not data.startswith(b"PK\x03\x04"):
        return []
    import io
    import zipfile

    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            return archive.namelist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        return []


def _office_zip(data: bytes) -> bool:
    """An .xlsx or .ods workbook: a zip holding xl/ or an OpenDocument spreadsheet's mimetype."""
    names = _zip_names(data)
    return any(n.startswith("xl/") for n in names) or (
        "mimetype" in names and b"opendocument.spreadsheet" in data[:200]
    )


def _torch_zip(data: bytes) -> bool:
    """A torch.save archive: a zip holding a data.pkl."""
    return any(n.endswith("data.pkl") for n in _zip_names(data))


PYTORCH = Foreign(
    "a PyTorch file (torch.save), which attn does not read: it would have to unpickle it",
    (".pt", ".pth", ".ckpt"),
    "save the tensor with np.save(f, t.numpy()) or in a safetensors file",
    recognise=_torch_zip,
)

FOREIGN: tuple[Foreign, ...] = (
    PYTORCH,
    Foreign(
        "an Excel workbook",
        (".xlsx", ".xlsm", ".xls", ".ods"),
        EXCEL_HOW,
        magic=(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1",),
        recognise=_office_zip,
    ),
    Foreign(
        "a Parquet file",
        (".parquet",),
        "save it with pandas: read_parquet(f).to_csv(...), or np.save",
        magic=(b"PAR1",),
    ),
    Foreign(
        "an Arrow/Feather file",
        (".feather", ".arrow"),
        "save it with pandas: read_feather(f).to_csv(...), or np.save",
        magic=(b"ARROW1",),
    ),
    Foreign(
        "an HDF5 file",
        (".h5", ".hdf5", ".hdf"),
        "save the dataset with np.save(f, h5py.File(path)[name][()])",
        magic=(b"\x89HDF\r\n\x1a\n",),
    ),
    Foreign(
        "a MATLAB file",
        (".mat",),
        "save the variable with np.save(f, scipy.io.loadmat(path)[name])",
        magic=(b"MATLAB 5.0 MAT-file",),
    ),
    Foreign(
        "a Python pickle, which attn never unpickles",
        (".pkl", ".pickle"),
        "save the array with np.save, or a DataFrame with to_csv",
        magic=tuple(b"\x80" + bytes([protocol]) for protocol in range(2, 6)),
    ),
)


def refuse_foreign(suffix: str, data: Callable[[], bytes], source: str) -> None:
    """Raise the one line for a foreign file, known by its extension or first bytes; else nothing."""
    for foreign in FOREIGN:
        if suffix in foreign.extensions:
            raise refusal(foreign, source)
    head = data()
    for foreign in FOREIGN:
        if any(head.startswith(m) for m in foreign.magic) or foreign.recognise and foreign.recognise(head):
            raise refusal(foreign, source)


def refusal(foreign: Foreign, source: str) -> AttnError:
    return AttnError(
        f"is {foreign.what}" + ("" if "attn" in foreign.what else ", which attn does not read"),
        source=source,
        hint=foreign.how,
    )
