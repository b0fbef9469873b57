"""All-or-nothing publication of a group of files in one directory, and verified reads.

A *save* replaces several files of a directory ``D`` at once (the variable files and
``__model__`` of a checkpoint, ``x.pdparams`` / ``.pdopt`` / ``.pdmodel``, ...). The files keep
their plain names; fluidlite adds two kinds of hidden entries::

    D/.fluidlite-manifest.json     {"format": "fluidlite.checkpoint", "version": 1,
                                    "staging": ".fluidlite-staging-<token>" | null,
                                    "files": {"<name>": {"size": N, "sha256": "<hex>"}, ...}}
    D/.fluidlite-staging-<token>/  the files of the save being published (transient)

``publish(D, files)``, under an exclusive ``flock`` on ``D`` (threads and processes; where a
directory cannot be flocked, e.g. on NFS, on the file ``D/.fluidlite-lock``):

1. *recover*: if the manifest names a staging directory that still holds files (a save crashed
   after its commit), move them into place; then delete every staging directory and temp file
   that crashed saves left behind;
2. *stage*: write every new file into a fresh staging directory; then fsync them and the dir;
3. *commit*: replace the manifest (temp file, fsync, ``os.replace``, fsync ``D``) by one that
   lists the size and SHA-256 of every file -- the new ones and the untouched older ones -- and
   names the staging directory. This single rename is the commit point;
4. *publish*: ``os.replace`` each staged file onto its name, fsync ``D``, remove the staging dir.

Readers (``Reader``, under a shared ``flock``) take a listed file from the staging directory
while it is still there and from ``D`` otherwise, check its size against the manifest before
reading anything and its checksum after. A crash before step 3 changed no visible file and left
the old manifest: readers see the old checkpoint. From step 3 on, every new file is either in
place or still staged: readers see the new one. A file the manifest does not list (or a
directory without a manifest: files not written by fluidlite) is read as is, unverified.

Why not swap a whole directory: ``rename`` cannot replace a non-empty directory atomically, and
a checkpoint's files often share a directory with other files (several ``fluid.save`` prefixes,
user files), so the plain fluid layout is kept and one small file carries the commit instead.
"""
from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import re
import secrets
import shutil
import stat
import threading
from typing import IO, Any, Callable, Dict, Iterator, List, Mapping, Optional, Set, Tuple, Union

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no cross-process locking
    fcntl = None  # type: ignore[assignment]

__all__ = ["CheckpointError", "MANIFEST_NAME", "publish", "write_file", "Reader", "read_file",
           "memory_limit", "is_reserved"]

_log = logging.getLogger("fluidlite")

MANIFEST_NAME = ".fluidlite-manifest.json"
_FORMAT = "fluidlite.checkpoint"
_VERSION = 1
_STAGING_PREFIX = ".fluidlite-staging-"
_RESERVED_PREFIX = ".fluidlite-"
_TMP_RE = re.compile(r"^\.(?P<name>.+)\.[a-z0-9_]{8}\.tmp$")   # atomic_write's temp files
_CHUNK = 1 << 24
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_UNVERIFIED_HINT = f"(delete {MANIFEST_NAME} in that directory to load its files unverified)"
_MAX_MANIFEST = 1 << 26
_MAX_DEPTH = 64             # sub-directory levels a listing descends (variable name scopes)
_MAX_FILES = 1 << 20        # entries a listing collects
PathLike = Union[str, "os.PathLike[str]"]


class CheckpointError(RuntimeError):
    """A checkpoint file is corrupted or truncated, or a value does not match its variable."""


def memory_limit() -> int:
    """Largest file or array (bytes) a loader will allocate: this machine's physical memory.
    A header, manifest or container claiming more is treated as a lie (CheckpointError)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - exotic platforms
        return 1 << 62


def is_reserved(name: str) -> bool:
    """True for names fluidlite uses for its own bookkeeping in a checkpoint directory."""
    return name.startswith(_RESERVED_PREFIX)


# -- locking ----------------------------------------------------------------------------------
_held = threading.local()
_LOCK_NAME = ".fluidlite-lock"
_NO_DIR_FLOCK = (errno.EBADF, errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL, errno.EACCES)


@contextlib.contextmanager
def _locked(directory: str, exclusive: bool) -> Iterator[None]:
    """``flock`` the directory itself, so no lock file is needed; where a directory cannot be
    flocked (NFS emulates flock with byte-range locks, which need a writable file) the file
    ``.fluidlite-lock`` in it is locked instead. Re-entrant within a thread; separate open file
    descriptions exclude each other across threads as well as processes."""
    if fcntl is None:  # pragma: no cover
        yield
        return
    try:
        fd = os.open(directory, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    except OSError:
        if exclusive:
            raise
        yield           # unreadable directory: the reads below fail with a clear error
        return
    try:
        st = os.fstat(fd)
        key = (st.st_dev, st.st_ino)
        held: Set[Tuple[int, int]] = getattr(_held, "keys", None) or set()
        _held.keys = held
        if key in held:
            yield
            return
        mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
        try:
            fcntl.flock(fd, mode)
        except OSError as e:
            if e.errno not in _NO_DIR_FLOCK:
                raise
            os.close(fd)
            fd = -1
            fd = _lock_file(directory, exclusive)
            if fd >= 0:
                fcntl.flock(fd, mode)
        held.add(key)
        try:
            yield
        finally:
            held.discard(key)
    finally:
        if fd >= 0:
            os.close(fd)        # releases the flock


def _lock_file(directory: str, exclusive: bool) -> int:
    """An fd of ``directory/.fluidlite-lock`` (created by writers); -1 when a reader cannot
    open it (read-only directory that never had a save: nothing to exclude)."""
    path = os.path.join(directory, _LOCK_NAME)
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | _CLOEXEC, 0o644)
    except OSError:
        if exclusive:
            raise
    try:
        return os.open(path, os.O_RDONLY | _CLOEXEC)
    except OSError:
        return -1


# -- low-level writes (all through os.*, one call per file operation) -------------------------
def _write_new(path: str, data: Union[bytes, bytearray, memoryview], sync: bool = True) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _CLOEXEC, 0o644)
    try:
        view = memoryview(data).cast("B")
        off = 0
        while off < len(view):
            off += os.write(fd, view[off:off + _CHUNK])
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_path(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | _CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(directory: str) -> None:
    """Make the renames in ``directory`` durable (POSIX; Windows cannot open directories)."""
    if os.name == "nt":  # pragma: no cover
        return
    fd = os.open(directory, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _valid_name(name: Any) -> bool:
    """A file name relative to the checkpoint directory: plain names, or ``/``-separated paths
    (fluid saved a variable named ``block1/conv/w`` as that sub-path) whose every component is
    a real name -- never absolute, never ``.``/``..``, never fluidlite's reserved prefix."""
    if not isinstance(name, str) or "\\" in name or "\0" in name or \
            (os.sep != "/" and os.sep in name):
        return False
    return all(p not in ("", ".", "..") and not is_reserved(p) for p in name.split("/"))


def _check_name(name: str) -> None:
    if isinstance(name, str) and any(is_reserved(p) for p in name.split("/")):
        raise ValueError(f"checkpoint file name {name!r} is reserved: fluidlite reserves "
                         f"names starting with '{_RESERVED_PREFIX}' for its own bookkeeping")
    if not _valid_name(name):
        raise ValueError(f"checkpoint file name {name!r} is not a file path inside the "
                         f"directory (empty, absolute, '.' or '..' components, a backslash "
                         f"or NUL)")


def _inside(base: str, name: str, create: bool = False) -> str:
    """``base/name`` after checking that every directory on the way (``name``'s components but
    the last) is a real directory inside ``base``: a symlink or a file there is refused, so a
    hostile checkpoint cannot lead a save or a load outside it. ``create`` makes the missing
    ones (fsyncing each parent, so the new entries are durable)."""
    if "/" not in name:
        return os.path.join(base, name)
    path = base
    for part in name.split("/")[:-1]:
        parent, path = path, os.path.join(path, part)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            if not create:
                continue
            os.mkdir(path, 0o755)
            _fsync_dir(parent)
            continue
        if not stat.S_ISDIR(st.st_mode):
            raise CheckpointError(f"'{path}' is a symlink or not a directory; the checkpoint "
                                  f"file '{name}' must lie in real sub-directories of "
                                  f"'{base}' (fluidlite never follows a link out of it)")
    return os.path.join(base, name)


def _subdirs(name: str) -> List[str]:
    """The sub-directories ``name`` lies in, deepest first (``a/b/c`` -> ``a/b``, ``a``)."""
    parts = name.split("/")[:-1]
    return ["/".join(parts[:i]) for i in range(len(parts), 0, -1)]


# -- paths a manifest leads to ----------------------------------------------------------------
def _plain_file(path: str) -> bool:
    """``path`` is a regular file itself: not a symlink, FIFO, device or directory."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _staging_dir(directory: str, staging: Optional[str]) -> Optional[str]:
    """The staging directory a manifest names, if it is a real directory directly inside
    ``directory`` (never a symlink: a manifest from elsewhere must not lead outside)."""
    if not staging:
        return None
    path = os.path.join(directory, staging)
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or \
            os.path.realpath(os.path.dirname(path)) != os.path.realpath(directory):
        return None
    return path


def _sha256_of(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for piece in iter(lambda: f.read(1 << 20), b""):
            h.update(piece)
    return h.hexdigest()


# -- manifest ---------------------------------------------------------------------------------
def _read_manifest(directory: str) -> Optional[Dict[str, Any]]:
    """The directory's manifest, None without one; CheckpointError if it is malformed or not a
    regular file (a FIFO would block the reader forever, a symlink could lead anywhere)."""
    path = os.path.join(directory, MANIFEST_NAME)
    if os.path.lexists(path) and not _plain_file(path):
        raise CheckpointError(f"checkpoint manifest '{path}' is not a regular file (a symlink, "
                              f"FIFO or device); refusing to read it. Remove it to load the "
                              f"files without verification.")
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            raw = f.read() if size <= _MAX_MANIFEST else b""
    except FileNotFoundError:
        return None
    except OSError as e:
        raise CheckpointError(f"cannot read checkpoint manifest '{path}': {e}") from None

    def bad(why: str) -> CheckpointError:
        return CheckpointError(f"checkpoint manifest '{path}' is corrupted ({why}); it is not "
                               f"fluidlite's or was damaged. Delete it to load the files "
                               f"without verification.")
    if size > _MAX_MANIFEST:
        raise bad(f"{size} bytes, larger than {_MAX_MANIFEST}")
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise bad(f"not JSON: {e}") from None
    if not isinstance(doc, dict) or doc.get("format") != _FORMAT:
        raise bad("wrong 'format'")
    version = doc.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise bad(f"bad 'version' {version!r}")
    if version > _VERSION:
        raise CheckpointError(f"checkpoint manifest '{path}' has version {version}; this "
                              f"fluidlite reads version {_VERSION}. Upgrade fluidlite.")
    staging = doc.get("staging")
    if staging is not None and not (isinstance(staging, str) and
                                    staging.startswith(_STAGING_PREFIX) and "/" not in staging
                                    and "\\" not in staging):
        raise bad(f"bad 'staging' {staging!r}")
    files = doc.get("files")
    if not isinstance(files, dict):
        raise bad("'files' is not an object")
    for name, e in files.items():
        ok = isinstance(e, dict) and isinstance(e.get("size"), int) and \
            not isinstance(e.get("size"), bool) and e["size"] >= 0 and \
            isinstance(e.get("sha256"), str) and re.fullmatch(r"[0-9a-f]{64}", e["sha256"])
        if not ok or not _valid_name(name):
            raise bad(f"bad entry for {name!r}")
    return {"staging": staging, "files": files}


def _write_manifest(directory: str, files: Dict[str, Dict[str, Any]],
                    staging: Optional[str]) -> None:
    doc = {"format": _FORMAT, "version": _VERSION, "staging": staging,
           "files": {k: files[k] for k in sorted(files)}}
    data = json.dumps(doc, indent=0, sort_keys=False).encode("utf-8") + b"\n"
    tmp = os.path.join(directory, f"{MANIFEST_NAME}.{secrets.token_hex(4)}.tmp")
    try:
        _write_new(tmp, data)
        os.replace(tmp, os.path.join(directory, MANIFEST_NAME))
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(directory)


# -- recovery ---------------------------------------------------------------------------------
def _recover(directory: str, manifest: Optional[Dict[str, Any]], names: Set[str]) -> None:
    """Finish the publish ``manifest`` records (if a crash interrupted it), then delete every
    staging dir, manifest temp file and stale temp file of ``names``. Holds the exclusive lock."""
    sdir = _staging_dir(directory, manifest["staging"]) if manifest is not None else None
    if manifest is not None and manifest["staging"] and sdir is None:
        _log.warning("checkpoint manifest in '%s' names staging '%s', which is not a directory "
                     "inside it; not finishing that publish", directory, manifest["staging"])
    if manifest is not None and sdir is not None:
        moved = False
        touched: Set[str] = set()
        for name, entry in manifest["files"].items():
            try:
                src = _inside(sdir, name)
            except CheckpointError:
                continue
            # only a regular file in the real staging dir whose size *and* checksum are the
            # manifest's (staged files were fsynced before the commit)
            if not _plain_file(src) or os.lstat(src).st_size != entry["size"] or \
                    _sha256_of(src) != entry["sha256"]:
                continue
            os.replace(src, _inside(directory, name, create=True))
            touched.add(os.path.dirname(os.path.join(directory, name)))
            moved = True
        if moved:
            for d in sorted(touched, key=len, reverse=True):
                _fsync_dir(d)
            _log.info("finished publishing the checkpoint in '%s' that an interrupted save had "
                      "committed", directory)
    known = set(names) | (set(manifest["files"]) if manifest is not None else set())
    with os.scandir(directory) as it:
        stale = [e for e in it if e.name.startswith(_STAGING_PREFIX) or
                 (e.name.startswith(MANIFEST_NAME + ".") and e.name.endswith(".tmp")) or
                 (_TMP_RE.match(e.name) and _TMP_RE.match(e.name).group("name") in known)]
    for e in stale:
        path = os.path.join(directory, e.name)
        if e.is_dir(follow_symlinks=False):
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)


# -- writing ----------------------------------------------------------------------------------
def publish(directory: PathLike, files: Mapping[str, Union[bytes, bytearray, memoryview]]
            ) -> None:
    """Replace ``files`` (plain name -> content) in ``directory`` all-or-nothing (see the module
    docstring). Other files of the directory keep their content and manifest entries."""
    directory = os.fspath(directory) or "."
    for name in files:
        _check_name(name)
    if not files:
        return
    for name in files:
        _inside(directory, name)        # no symlink or file where a sub-directory must be
        if os.path.isdir(os.path.join(directory, name)):
            raise IsADirectoryError(f"cannot save '{os.path.join(directory, name)}': a "
                                    f"directory of that name is in the way")
    with _locked(directory, exclusive=True):
        try:
            manifest = _read_manifest(directory)
        except CheckpointError as e:
            _log.warning("%s -- replacing it; the files it listed are no longer verified", e)
            manifest = None
        _recover(directory, manifest, set(files))
        staging = _STAGING_PREFIX + secrets.token_hex(8)
        sdir = os.path.join(directory, staging)
        os.mkdir(sdir, 0o700)
        entries: Dict[str, Dict[str, Any]] = {}
        try:
            for name, data in files.items():
                _write_new(_inside(sdir, name, create=True), data, sync=False)
                entries[name] = {"size": len(memoryview(data).cast("B")),
                                 "sha256": hashlib.sha256(data).hexdigest()}
            for name in files:      # after all writes: one journal commit flushes them all
                _fsync_path(os.path.join(sdir, name))
            for sub in sorted({d for n in files for d in _subdirs(n)}, key=len, reverse=True):
                _fsync_dir(os.path.join(sdir, sub))
            _fsync_dir(sdir)
            listed = {} if manifest is None else {
                n: e for n, e in manifest["files"].items()
                if n not in entries and os.path.lexists(os.path.join(directory, n))}
            listed.update(entries)
            _write_manifest(directory, listed, staging)         # the commit point
        except BaseException:
            # whatever failed -- an I/O error, Ctrl-C -- the manifest on disk decides: once it
            # names this staging dir the new checkpoint is committed and cleanup only rolls
            # forward (loaders already read the staged files); before, the old one stands
            if _committed(directory, staging):
                _finish(directory, sdir, files)
            else:
                shutil.rmtree(sdir, ignore_errors=True)
            raise
        _finish(directory, sdir, files)


def _committed(directory: str, staging: str) -> bool:
    try:
        m = _read_manifest(directory)
    except CheckpointError:
        return False
    return m is not None and m["staging"] == staging


def _finish(directory: str, sdir: str, files: Mapping[str, Any]) -> None:
    """Move the staged files of a committed publish into place (idempotent: what a crash or
    an error leaves undone, the next save's recovery finishes)."""
    subdirs = sorted({d for n in files for d in _subdirs(n)}, key=len, reverse=True)
    try:
        for name in files:
            src = os.path.join(sdir, name)
            if os.path.lexists(src):
                os.replace(src, _inside(directory, name, create=True))
        for sub in subdirs:
            _fsync_dir(os.path.join(directory, sub))
        _fsync_dir(directory)
        for sub in subdirs:                 # the staging dir's own, now empty, sub-directories
            os.rmdir(os.path.join(sdir, sub))
        os.rmdir(sdir)
    except BaseException:
        _log.warning("publishing into '%s' was interrupted after its commit; loaders see the "
                     "new checkpoint and the next save finishes it", directory)
        raise


def write_file(path: PathLike, data: Union[bytes, bytearray]) -> None:
    """Replace one file atomically: through ``publish`` when its directory holds a fluidlite
    checkpoint (so the manifest stays true), else temp file + fsync + ``os.replace``."""
    path = os.path.abspath(os.fspath(path))
    directory, name = os.path.split(path)
    with _locked(directory, exclusive=True):
        if os.path.exists(os.path.join(directory, MANIFEST_NAME)) and not is_reserved(name):
            publish(directory, {name: data})
            return
        _recover(directory, None, {name})
        tmp = os.path.join(directory, f".{name}.{secrets.token_hex(4)}.tmp")
        try:
            _write_new(tmp, data)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        _fsync_dir(directory)


# -- reading ----------------------------------------------------------------------------------
class Reader:
    """A consistent, verified view of a checkpoint directory (use as a context manager).

    ``what`` arguments name the thing being loaded in errors (e.g. ``"variable 'fc_0.w_0'"``);
    errors always name the file by its published path."""

    def __init__(self, directory: PathLike) -> None:
        self.directory = os.fspath(directory) or "."
        self._lock: Optional[contextlib.AbstractContextManager] = None
        self._manifest: Optional[Dict[str, Any]] = None

    def __enter__(self) -> "Reader":
        self._lock = _locked(self.directory, exclusive=False)
        self._lock.__enter__()
        try:
            self._manifest = _read_manifest(self.directory)
        except BaseException:
            self._lock.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        assert self._lock is not None
        self._lock.__exit__(*exc)

    def display(self, name: str) -> str:
        return os.path.join(self.directory, name)

    def entry(self, name: str) -> Optional[Dict[str, Any]]:
        return None if self._manifest is None else self._manifest["files"].get(name)

    def path(self, name: str) -> str:
        """Where the current content of ``name`` is: its staged copy while a committed publish
        is unfinished, else the file itself."""
        m = self._manifest
        if m is not None and m["staging"] and name in m["files"]:
            sdir = _staging_dir(self.directory, m["staging"])
            staged = _inside(sdir, name) if sdir is not None else None
            if staged is not None and _plain_file(staged):
                return staged
        return _inside(self.directory, name)

    def exists(self, name: str) -> bool:
        if self.entry(name) is not None and os.path.isfile(self.path(name)):
            return True
        return _valid_name(name) and os.path.isfile(_inside(self.directory, name))

    def names(self) -> Set[str]:
        """Plain (not hidden) files of the directory and of its real (not symlinked, not
        hidden) sub-directories, as ``/``-separated paths, plus every file the manifest lists.
        A tree deeper than ``_MAX_DEPTH`` or with more than ``_MAX_FILES`` entries is refused
        (CheckpointError): a hostile directory must not make a listing run forever."""
        out: Set[str] = set()
        pending = [("", 0)]
        while pending:
            rel, depth = pending.pop()
            with os.scandir(os.path.join(self.directory, rel) if rel else self.directory) as it:
                for e in it:
                    if e.name.startswith("."):
                        continue
                    name = f"{rel}/{e.name}" if rel else e.name
                    if e.is_dir(follow_symlinks=False):
                        if depth + 1 > _MAX_DEPTH:
                            raise CheckpointError(f"'{self.display(name)}' lies more than "
                                                  f"{_MAX_DEPTH} directories deep")
                        pending.append((name, depth + 1))
                    elif e.is_file():
                        out.add(name)
                    if len(out) + len(pending) > _MAX_FILES:
                        raise CheckpointError(f"'{self.directory}' holds more than "
                                              f"{_MAX_FILES} files")
        if self._manifest is not None:
            out |= {n for n in self._manifest["files"] if self.exists(n)}
        return out

    def _label(self, what: Optional[str]) -> str:
        return f"Cannot load {what}: " if what else ""

    def open(self, name: str, what: Optional[str] = None) -> Tuple[IO[bytes], int]:
        """Open ``name`` for reading and return it with its size, after checking the size
        against the manifest and ``memory_limit()`` (nothing is read yet)."""
        shown = self.display(name)
        path = self.path(name)
        try:
            if not stat.S_ISREG(os.stat(path).st_mode):     # a FIFO would block forever
                raise CheckpointError(f"{self._label(what)}'{shown}' is not a regular file")
            f = open(path, "rb")
        except FileNotFoundError:
            raise FileNotFoundError(f"{self._label(what)}file '{shown}' does not exist") \
                from None
        size = os.fstat(f.fileno()).st_size
        entry = self.entry(name)
        problem = None
        if entry is not None and size != entry["size"]:
            problem = (f"file '{shown}' holds {size} bytes but the checkpoint manifest records "
                       f"{entry['size']}: it was truncated or changed after fluidlite saved it "
                       f"{_UNVERIFIED_HINT}")
        elif size > memory_limit():
            problem = (f"file '{shown}' is {size} bytes, more than this machine's memory "
                       f"({memory_limit()} bytes)")
        if problem:
            f.close()
            raise CheckpointError(self._label(what) + problem)
        return f, size

    def check(self, name: str, digest: "hashlib._Hash", what: Optional[str] = None) -> None:
        entry = self.entry(name)
        if entry is not None and digest.hexdigest() != entry["sha256"]:
            raise CheckpointError(
                f"{self._label(what)}file '{self.display(name)}' does not match the checksum "
                f"in the checkpoint manifest: it is corrupted or was changed after fluidlite "
                f"saved it {_UNVERIFIED_HINT}")

    def read_bytes(self, name: str, what: Optional[str] = None,
                   inspect: Optional[Callable[[IO[bytes], int], None]] = None) -> bytearray:
        """The verified content of ``name``. For a file the manifest does not cover,
        ``inspect(f, size)`` may check its header first, before its size is allocated."""
        f, size = self.open(name, what)
        with f:
            if inspect is not None and self.entry(name) is None:
                inspect(f, size)
                f.seek(0)
            buf = _read_exact(f, size, lambda: CheckpointError(
                f"{self._label(what)}file '{self.display(name)}' shrank while being read"))
        self.check(name, hashlib.sha256(buf), what)
        return buf

    def open_verified(self, name: str, what: Optional[str] = None) -> Tuple[IO[bytes], int]:
        """``open`` plus a streamed checksum check; the file is returned rewound."""
        f, size = self.open(name, what)
        try:
            if self.entry(name) is not None:
                h = hashlib.sha256()
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
                self.check(name, h, what)
                f.seek(0)
        except BaseException:
            f.close()
            raise
        return f, size


def _read_exact(f: IO[bytes], size: int, error: Any) -> bytearray:
    try:
        buf = bytearray(size)
    except MemoryError:
        raise error() from None
    view = memoryview(buf)
    got = 0
    while got < size:
        n = f.readinto(view[got:])  # type: ignore[attr-defined]
        if not n:
            raise error()
        got += n
    return buf


def read_file(path: PathLike, what: Optional[str] = None) -> bytearray:
    """The verified content of one file (its checkpoint directory's manifest applies)."""
    path = os.fspath(path)
    directory, name = os.path.split(path)
    with Reader(directory or ".") as r:
        return r.read_bytes(name, what)
