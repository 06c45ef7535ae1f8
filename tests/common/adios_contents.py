"""Every variable (dtype, shape, bytes) and attribute of an ADIOS2 file (or of a joined data set,
read as one file): what the conversion tests compare byte for byte."""

from __future__ import annotations


def bp_contents(path) -> dict:
    """``{name: (dtype, shape, bytes)}`` for variables, ``{"@" + name: repr}`` for attributes."""
    import adios2

    from mdloader_plugin.sources.joined import JoinedReader, is_joined

    out = {}
    f = JoinedReader(str(path)) if is_joined(str(path)) else adios2.FileReader(str(path))
    try:
        for name in sorted(f.available_variables()):
            a = f.read(name)
            out[name] = (a.dtype.str, a.shape, a.tobytes())
        for name in sorted(f.available_attributes()):
            out["@" + name] = repr(f.read_attribute(name))
    finally:
        f.close()
    return out
