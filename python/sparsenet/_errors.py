"""The exceptions of sparsenet: one class per category of the library's ``sparsenet::Error``.

Every error the library raises reaches Python as one of these, with the library's message
(which names the file, line, JSON path or value at fault). Each also derives from the built-in
exception a Python caller would expect (``ValueError`` for bad configs, data and arguments,
``OSError`` for files), so ``except ValueError`` works too.
"""

from __future__ import annotations


class Error(Exception):
    """Base class of every error sparsenet raises; ``category`` names the library's category."""

    category = "internal"


class ConfigError(Error, ValueError):
    """Network JSON: syntax, unknown key, wrong type or bad value."""

    category = "config"


class DataError(Error, ValueError):
    """Dataset contents: shapes, indices out of range, names not found, unknown items."""

    category = "data"


class FileError(Error, OSError):
    """Files: missing, unreadable, corrupt, truncated, not netCDF."""

    category = "io"


class DeviceError(Error, RuntimeError):
    """Backend: out of memory, no such device, driver errors."""

    category = "device"


class CommunicationError(Error, RuntimeError):
    """MPI / NCCL."""

    category = "communication"


class NumericError(Error, ArithmeticError):
    """Training diverged: a NaN or an infinity in the loss or the parameters."""

    category = "numeric"


class UsageError(Error, ValueError):
    """API misuse: a bad option or argument."""

    category = "usage"


class NotImplementedFeature(Error, NotImplementedError):
    """A DSSTNE feature this version does not implement yet."""

    category = "not_implemented"


class InternalError(Error, RuntimeError):
    """A broken invariant: a bug in sparsenet."""

    category = "internal"


__all__ = [
    "Error", "ConfigError", "DataError", "FileError", "DeviceError", "CommunicationError",
    "NumericError", "UsageError", "NotImplementedFeature", "InternalError",
]
