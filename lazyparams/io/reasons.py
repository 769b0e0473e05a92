"""Our words for the errors of what the readers call: the OS, JSON, UTF-8, zip, zlib and pickle.

A reader catches a foreign exception where it can happen and raises a CheckpointError built from
one of these, so a message says what is wrong with the file, and where, without passing on
another library's text or an object's repr. Imports only the standard library.
"""

from __future__ import annotations

import json
import pickle
import re
import struct
import zipfile

_JSON_PROBLEMS = {
    "Expecting value": "expected a value",
    "Expecting ',' delimiter": "expected ',' between items",
    "Expecting ':' delimiter": "expected ':' after a key",
    "Expecting property name enclosed in double quotes": "expected a key in double quotes",
    "Extra data": "more text after the end of the JSON value",
    "Unterminated string starting at": "a string that never ends",
    "Invalid control character at": "a control character inside a string",
    "Invalid \\escape": "an invalid escape in a string",
    "Invalid \\uXXXX escape": "an invalid \\u escape in a string",
}


def os_reason(err: OSError) -> str:
    """What the OS said went wrong, without the file names an OSError's text repeats."""
    if err.strerror:
        return err.strerror
    return f"I/O error {err.errno}" if err.errno else "an I/O error"


def json_reason(err: json.JSONDecodeError) -> str:
    """What is wrong with JSON text and where, as a byte offset into its UTF-8 form."""
    problem = _JSON_PROBLEMS.get(err.msg, "malformed JSON")
    byte = len(err.doc[: err.pos].encode("utf-8", "surrogatepass"))
    return f"{problem} at byte {byte} (line {err.lineno}, column {err.colno})"


def utf8_reason(err: UnicodeDecodeError) -> str:
    """Where bytes stop being UTF-8, and whether they just end inside a character."""
    if err.reason == "unexpected end of data":
        return f"the text ends inside a character that starts at byte {err.start}"
    bad = err.object[err.start : err.start + 1].hex()
    return f"byte {err.start} (0x{bad}) is not valid there in UTF-8"


def zip_directory_reason(err: BaseException) -> str:
    """What is wrong with a zip archive whose central directory zipfile could not read."""
    text = str(err)
    if isinstance(err, OSError) and not isinstance(err, zipfile.BadZipFile):
        return f"cannot read it: {os_reason(err)}"
    if isinstance(err, UnicodeDecodeError):
        return "a member name is not valid UTF-8"
    if isinstance(err, (struct.error, EOFError)) or "Truncated" in text:
        return "its central directory is truncated"
    if "not a zip file" in text:
        return "no end-of-central-directory record (not a zip archive, or a truncated one)"
    if "span multiple disks" in text:
        return "it spans several disks; expected a single-file archive"
    if "magic number" in text:
        return "an entry of its central directory lacks the entry signature"
    if "extra field" in text:
        return "an entry's extra field is corrupt"
    if isinstance(err, zipfile.LargeZipFile):
        return "it needs ZIP64 extensions, which are not enabled for it"
    return "its central directory holds sizes, offsets or fields out of range"


def zip_version(err: NotImplementedError) -> str:
    """The zip version an archive asked for, from zipfile's refusal (digits only)."""
    found = re.search(r"\d+(\.\d+)?", str(err))
    return f"zip version {found.group()}" if found else "a newer zip version"


_PICKLE_PROBLEMS = (
    ("truncated", "the pickle ends before its STOP opcode (truncated)"),
    ("stack underflow", "an opcode takes more values than the pickle has pushed"),
    ("could not find MARK", "an opcode needs a MARK that the pickle never set"),
    ("Memo value not found", "an opcode refers to a memo slot the pickle never filled"),
    ("unsupported pickle protocol", "an unknown pickle protocol; expected 2 to 5"),
    ("negative", "a negative length"),
)


def pickle_reason(err: BaseException) -> str:
    """What made pickle's own unpickling fail (not one of our refusals), in our words."""
    text = str(err) if isinstance(err, pickle.UnpicklingError | ValueError) else ""
    for words, reason in _PICKLE_PROBLEMS:
        if words in text:
            return reason
    if isinstance(err, EOFError | struct.error):
        return "the pickle ends inside an opcode's argument (truncated)"
    if isinstance(err, IndexError):
        return "an opcode takes more values than the pickle has pushed"
    if isinstance(err, KeyError):
        return "an opcode refers to a memo slot the pickle never filled"
    if isinstance(err, UnicodeDecodeError):
        return f"a string is not valid UTF-8 ({utf8_reason(err)})"
    if isinstance(err, TypeError):
        return (
            "an opcode was given values of the wrong kind (a call of something not callable, "
            "arguments a tensor rebuild does not take, or an unhashable dict key)"
        )
    if isinstance(err, RecursionError | MemoryError):
        return "it nests too deep or builds too much"
    return "an opcode cannot be applied to the values before it"
