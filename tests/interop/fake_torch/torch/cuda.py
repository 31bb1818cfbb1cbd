"""Fake torch.cuda: a device that is always there and always done."""

current = {"device": None}


def is_available() -> bool:
    return True


def set_device(device_id: int) -> None:
    current["device"] = device_id


def synchronize(device=None) -> None:
    return None
