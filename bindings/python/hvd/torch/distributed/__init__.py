"""dprun as a torch.distributed backend: DDP, FSDP and every torch.distributed call
run over dprun's negotiation, fusion, shared memory and failure reports, unchanged
but for the backend's name.

    import hvd.torch                              # registers the backend "dprun"
    torch.distributed.init_process_group("dprun")

Importing hvd.torch registers the backend (register()); nothing is compiled
against torch: the process group is a torch.distributed.ProcessGroup subclass in
Python over the C API (process_group.py), so one hvd package serves every torch
release from 1.13 on.

Launchers. init_process_group's default rendezvous (env://) reads RANK,
WORLD_SIZE, MASTER_ADDR and MASTER_PORT. dprun and torchrun set them; under
another launcher that dprun recognizes (mpirun, srun, ...; hvd_detect_launcher),
register() sets the missing ones from that launcher's variables (MASTER_ADDR and
MASTER_PORT as dprun's own store rule gives them, dprun's store then taking the
port after), so `init_process_group("dprun")` needs no variable there either.

Groups. The default group is dprun's global process set. Every group made later
(new_group, DeviceMesh's) gets a process set of its own, added on every rank in
the order torch makes the groups: its members add it when torch calls the backend,
the other ranks, which torch does not call, in a wrapper around torch's group
helper (install_group_hook). Groups must list their ranks in ascending order (the
default); new_group(use_local_synchronization=True), where the other ranks make
no call at all, is refused by the wait for them timing out, naming the set.

destroy_process_group: torch 2.x shuts the world group down, and dprun with it
when the backend started it, so init_process_group can start it again; torch 1.13
does not tell the backend, and a second init_process_group reuses the running
runtime.
"""
import functools
import os
import threading

import torch
import torch.distributed as dist

from hvd import _lib
from hvd import basics
from hvd import errors

NAME = "dprun"
_tls = threading.local()
_registered = False


def _creator(store, rank, size, timeout):
    from hvd.torch.distributed.process_group import ProcessGroupDprun
    started = not basics.is_initialized()
    basics.init()
    members = getattr(_tls, "members", None)
    _tls.members = None
    if not members:  # the default group: every rank
        if (rank, size) != (basics.rank(), basics.size()):
            raise errors.InvalidArgumentError(
                "dprun: init_process_group says rank %d of %d, dprun's runtime rank %d of %d "
                "(dprun, torchrun, mpirun or srun started this process with another layout)"
                % (rank, size, basics.rank(), basics.size()))
        return ProcessGroupDprun(store, rank, size, range(size), None, timeout, started)
    if list(members) != sorted(members):
        raise errors.InvalidArgumentError(
            "dprun: a group's ranks must be in ascending order, got %s" % list(members))
    process_set = basics.add_process_set(list(members))
    return ProcessGroupDprun(store, rank, size, members, process_set, timeout)


def install_group_hook():
    """Wraps torch's group helper so that every rank adds a new group's process
    set: members when torch calls the backend (the wrapper tells _creator the
    group's ranks), the others once torch tells them they are not members."""
    c10d = dist.distributed_c10d
    original = c10d._new_process_group_helper
    if getattr(original, "_hvd_hook", False):
        return

    @functools.wraps(original)
    def helper(*args, **kwargs):
        ranks = args[2] if len(args) > 2 else kwargs.get(
            "global_ranks_in_group", kwargs.get("group_ranks", []))
        backend = args[3] if len(args) > 3 else kwargs.get("backend")
        ours = NAME in str(backend).lower()
        if ours:
            _tls.members = list(ranks)
        try:
            result = original(*args, **kwargs)
        finally:
            _tls.members = None
        pg = result[0] if isinstance(result, tuple) else result
        if ours and ranks and pg is dist.GroupMember.NON_GROUP_MEMBER:
            basics.add_process_set(sorted(ranks))
        return result
    helper._hvd_hook = True
    c10d._new_process_group_helper = helper


def fill_rendezvous_env(environ=os.environ):
    """Sets torch's env:// variables from the launcher dprun detects, where they
    are missing (see the module docstring). Returns the launcher's name, or ""."""
    if "RANK" in environ and "WORLD_SIZE" in environ:
        return ""
    if not _lib.has("hvd_detect_launcher"):
        return ""
    import ctypes
    buf = ctypes.create_string_buffer(4096)
    length = ctypes.c_size_t()
    _lib.check(_lib.lib().hvd_detect_launcher(buf, len(buf), ctypes.byref(length)),
               "hvd_detect_launcher")
    found = dict(line.split("=", 1) for line in buf.value.decode().splitlines() if "=" in line)
    launcher = found.get("launcher", "")
    if not launcher or "HVD_STORE_ADDR" not in found:
        return ""
    host, _, port = found["HVD_STORE_ADDR"].rpartition(":")
    host = host.strip("[]")
    # dprun's store takes MASTER_PORT + 1 once MASTER_PORT is set; a runtime already
    # running holds this port itself.
    torch_port = int(port) + (1 if basics.is_initialized() else 0)
    for name, value in (("RANK", found.get("HVD_RANK")), ("WORLD_SIZE", found.get("HVD_SIZE")),
                        ("LOCAL_RANK", found.get("HVD_LOCAL_RANK")),
                        ("LOCAL_WORLD_SIZE", found.get("HVD_LOCAL_SIZE")),
                        ("MASTER_ADDR", host), ("MASTER_PORT", str(torch_port))):
        if value is not None:
            environ.setdefault(name, value)
    return launcher


def register():
    """Registers the backend "dprun" with torch.distributed (once)."""
    global _registered
    if _registered or not dist.is_available():
        return
    try:
        fill_rendezvous_env()
    except errors.HvdError:
        pass  # hvd.init reports a malformed launcher variable itself
    kwargs = {}
    import inspect
    if "devices" in inspect.signature(dist.Backend.register_backend).parameters:
        kwargs["devices"] = ["cpu", "cuda"]
    dist.Backend.register_backend(NAME, _creator, **kwargs)
    install_group_hook()
    _registered = True


from hvd.torch.distributed.process_group import BackendDprun, ProcessGroupDprun  # noqa: E402,F401
