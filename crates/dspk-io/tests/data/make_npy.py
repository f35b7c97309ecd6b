"""Writes the small .npy/.npz test files of dspk-io's tests (run from this folder).

Requires numpy. The stored matrix is the one of tests/fixtures/README.md (workspace root), computed here
from its formula, so the files need nothing else.
"""

import numpy as np


def matrix(n=3000, c=4):
    t = np.arange(n, dtype=np.uint64)[:, None]
    ch = np.arange(c, dtype=np.uint64)[None, :]
    h = (t * np.uint64(2654435761) + ch * np.uint64(40503)) % np.uint64(2**32)
    v = ((37 * (ch + 1) * t + 1000 * ch) % 4001).astype(np.int64) - 2000 + ((h >> np.uint64(24)).astype(np.int64) - 128)
    v[100, :] = 32767
    v[101, :] = -32768
    return v.astype(np.int16)


m = matrix()
np.save("matrix_c_le.npy", m)
np.save("matrix_c_be.npy", m.astype(">i2"))
np.save("matrix_f_le.npy", np.asfortranarray(m))
np.save("matrix_f_be.npy", np.asfortranarray(m.astype(">i2")))
np.save("gains_be_f8.npy", np.array([0.195, 0.5, 1.0, 2.34375], dtype=">f8"))
np.save("ids_u2.npy", np.array(["A0", "A1", "A2", "A3"], dtype="<U2"))
np.save("small_f_i4.npy", np.asfortranarray(np.arange(24, dtype="<i4").reshape(2, 3, 4)))
np.save("floats_f4.npy", np.array([1.5, -2.25], dtype="<f4"))
# numpy writes every .npz member with zip64 extra fields (force_zip64=True).
np.savez("arrays.npz", matrix=m, gains=np.array([0.195, 0.5, 1.0, 2.34375]))
np.savez_compressed("arrays_compressed.npz", matrix=m, ids=np.array(["A0", "A1", "A2", "A3"]))

# A fully zip64 archive (zip64 extra fields in the central directory and a zip64 end record),
# as numpy writes for archives over 4 GiB: lower zipfile's limit so these small arrays get it.
import zipfile

_limit = zipfile.ZIP64_LIMIT
zipfile.ZIP64_LIMIT = 1
try:
    np.savez("arrays_zip64.npz", matrix=m, gains=np.array([0.195, 0.5, 1.0, 2.34375]))
finally:
    zipfile.ZIP64_LIMIT = _limit
# In a real archive over 4 GiB the classic end record's fields overflow and are saturated
# (0xFFFF / 0xFFFFFFFF); do the same here (the zip crate refuses a zip64 end record beside
# unsaturated classic fields, which only this small-archive trick produces).
import struct

with open("arrays_zip64.npz", "r+b") as f:
    data = f.read()
    end = data.rfind(b"PK\x05\x06")
    f.seek(end + 8)
    f.write(struct.pack("<HHII", 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF))
