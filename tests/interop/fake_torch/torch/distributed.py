"""Fake torch.distributed: every simulated rank lives in this one process, so a broadcast is a
shared slot that rank 0 (constructed first) fills and the others read."""

_broadcast_slot: list = [None]


def is_initialized() -> bool:
    return True


def broadcast_object_list(objects: list, src: int = 0) -> None:
    if objects[0] is not None:
        _broadcast_slot[0] = objects[0]
    else:
        objects[0] = _broadcast_slot[0]
