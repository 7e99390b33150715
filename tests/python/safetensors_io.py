# Minimal safetensors reader/writer for the PyTorch parity tests (the `safetensors` package is
# not in Debian): 8-byte LE header length, JSON header, raw little-endian tensor data.
import json
import struct

import numpy as np
import torch

# dtype tag -> (numpy dtype used to read/write the raw bytes, torch dtype of the result)
_DTYPES = {
    "F32": (np.dtype("<f4"), torch.float32),
    "F64": (np.dtype("<f8"), torch.float64),
    "F16": (np.dtype("<f2"), torch.float16),
    "BF16": (np.dtype("<i2"), torch.bfloat16),  # read as int16, then reinterpreted
    "I64": (np.dtype("<i8"), torch.int64),
    "I32": (np.dtype("<i4"), torch.int32),
    "I16": (np.dtype("<i2"), torch.int16),
    "I8": (np.dtype("i1"), torch.int8),
    "U8": (np.dtype("u1"), torch.uint8),
}
_TORCH_TO_TAG = {t: tag for tag, (_, t) in _DTYPES.items()}

# Refuse absurd header lengths (a corrupt file would otherwise make us allocate gigabytes).
_MAX_HEADER = 100 * 1024 * 1024


class SafetensorsError(ValueError):
    pass


def _numel(shape):
    n = 1
    for s in shape:
        n *= int(s)
    return n


def load(path):
    """Read a safetensors file. Returns (dict name -> torch.Tensor, metadata dict str -> str)."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise SafetensorsError(f"{path}: file too short ({len(blob)} bytes) for a safetensors header")
    (n,) = struct.unpack("<Q", blob[:8])
    if n > _MAX_HEADER or 8 + n > len(blob):
        raise SafetensorsError(f"{path}: header length {n} does not fit in a {len(blob)}-byte file")
    try:
        header = json.loads(blob[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SafetensorsError(f"{path}: header is not valid JSON: {e}") from None
    if not isinstance(header, dict):
        raise SafetensorsError(f"{path}: header is not a JSON object")
    data = memoryview(blob)[8 + n:]
    metadata = header.pop("__metadata__", None) or {}
    tensors = {}
    for name, info in header.items():
        tag = info.get("dtype")
        if tag not in _DTYPES:
            raise SafetensorsError(f"{path}: tensor {name!r} has unsupported dtype {tag!r}")
        npdt, tdt = _DTYPES[tag]
        shape = [int(s) for s in info["shape"]]
        begin, end = (int(x) for x in info["data_offsets"])
        nbytes = _numel(shape) * npdt.itemsize
        if not (0 <= begin <= end <= len(data)) or end - begin != nbytes:
            raise SafetensorsError(
                f"{path}: tensor {name!r} offsets [{begin}, {end}] do not match shape {shape} "
                f"{tag} ({nbytes} bytes) within {len(data)} data bytes")
        # copy: native byte order, writable, independent of the file buffer
        arr = np.frombuffer(data[begin:end], dtype=npdt).astype(npdt.newbyteorder("="), copy=True)
        t = torch.from_numpy(arr.reshape(shape))
        if tag == "BF16":
            t = t.view(torch.bfloat16)
        tensors[name] = t
    return tensors, dict(metadata)


def save(path, tensors, metadata=None):
    """Write dict name -> torch.Tensor (F32/BF16/I32/...) and str->str metadata as safetensors."""
    header = {}
    chunks = []
    offset = 0
    for name in sorted(tensors):
        t = tensors[name]
        if not isinstance(t, torch.Tensor):
            t = torch.as_tensor(t)
        t = t.detach().cpu().contiguous()
        if t.dtype not in _TORCH_TO_TAG:
            raise SafetensorsError(f"tensor {name!r}: dtype {t.dtype} cannot be written")
        tag = _TORCH_TO_TAG[t.dtype]
        npdt, _ = _DTYPES[tag]
        if tag == "BF16":
            t = t.view(torch.int16)
        raw = t.numpy().astype(npdt, copy=False).tobytes()
        header[name] = {"dtype": tag, "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    hbytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hbytes += b" " * ((8 - len(hbytes) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hbytes)))
        f.write(hbytes)
        for c in chunks:
            f.write(c)
