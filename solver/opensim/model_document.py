"""A .osim model as the XML document the scale tool edits and writes back.

The scale tool changes numbers in a model (offsets, marker locations, masses, default values)
and must write everything else as it was (muscles, geometry, ...). So it works on the parsed
document itself: `ModelDocument` holds the whole element tree of a .osim file, knows which
layout it is (OpenSim 3 and older: joints inside bodies, markers naming their <body>;
OpenSim 4: <JointSet>, sockets), resolves every frame, marker and path point to the body it is
fixed to, and turns the document into the engine's model (`om`) whenever asked, through the same
reader as `load_osim`.

Markers are read from a MarkerSet file in either layout and written in the model's layout: a
<body> name (OpenSim 3) or a <socket_parent_frame> path `/bodyset/<body>` (`/ground`) (OpenSim 4).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import _xml
from .errors import OpenSimFileError
from .osim import OpenSimModel, _Reader, build_model, osim_from_element


def number(value: float) -> str:
    """A float as OpenSim 4 prints it at full precision (17 significant digits, round trip)."""
    return repr(float(value))


def numbers(values) -> str:
    return " " + " ".join(number(v) for v in np.ravel(values))


def set_text(parent, tag: str, text: str):
    """Set the text of `parent`'s first <tag>, adding the element when it is missing."""
    elem = _xml.child(parent, tag)
    if elem is None:
        elem = _xml.Element(tag)
        parent.append(elem)
    elem.text = text
    return elem


def copy_tree(elem):
    """A deep copy of an element tree whose elements stay _xml.Elements (with their lines)."""
    out = _xml.Element(elem.tag, dict(elem.attrib))
    out.text, out.tail, out.line = elem.text, elem.tail, elem.line
    out.extend(copy_tree(c) for c in elem)
    return out


@dataclass
class MarkerEntry:
    """A marker read from a MarkerSet: `frame` is the body name (OpenSim 3) or the socket path
    (OpenSim 4) it is fixed to."""

    name: str
    frame: str
    location: np.ndarray
    fixed: bool


def read_marker_set(path) -> list:
    """The markers of a MarkerSet file (root <MarkerSet>, alone or inside <OpenSimDocument>)."""
    path = Path(path).resolve()
    root = _xml.parse(path)
    elem = root if root.tag == "MarkerSet" else _xml.child(root, "MarkerSet")
    if elem is None:
        raise OpenSimFileError(path, root.line, f"expected a <MarkerSet>, found <{root.tag}>")
    objects = _xml.child(elem, "objects")
    out = []
    for m in ([] if objects is None else objects):
        if m.tag != "Marker":
            continue
        frame = _xml.child_text(m, "body") or _xml.child_text(m, "socket_parent_frame", "socket_parent_frame_connectee_name")
        if frame is None:
            raise OpenSimFileError(path, m.line, f"marker {m.get('name')!r}: no <body> or <socket_parent_frame>")
        location = _xml.child_floats(m, "location", path, 3, default=[0.0, 0.0, 0.0], finite=True)
        out.append(MarkerEntry(m.get("name", ""), frame, location, _xml.child_bool(m, "fixed", path, False)))
    return out


class ModelDocument:
    """The element tree of a .osim file (module docstring)."""

    def __init__(self, root, path):
        self.root, self.path = root, Path(path)
        self.model = root if root.tag == "Model" else _xml.child(root, "Model")
        if self.model is None:
            raise OpenSimFileError(self.path, root.line, "no <Model> element")
        self.v4 = _xml.child(self.model, "Ground") is not None or bool(self._objects("JointSet"))

    @classmethod
    def read(cls, path) -> "ModelDocument":
        path = Path(path).resolve()
        return cls(_xml.parse(path), path)

    def copy(self) -> "ModelDocument":
        return ModelDocument(copy_tree(self.root), self.path)

    # ------------------------------------------------------------------------------- reading

    def _objects(self, set_tag: str, owner=None) -> list:
        holder = _xml.child(self.model if owner is None else owner, set_tag)
        objects = None if holder is None else _xml.child(holder, "objects")
        return [] if objects is None else list(objects)

    def osim(self):
        """The parsed model (OsimModel) of the document as it is now."""
        return osim_from_element(self.root, self.path)

    def om(self) -> OpenSimModel:
        """The engine model of the document as it is now."""
        return build_model(self.osim())

    def _reader(self) -> _Reader:
        reader = _Reader(self.path, self.model)
        if self.v4:
            reader._index_components()
        return reader

    def bodies(self) -> list:
        """The <Body> elements (not the ground of an OpenSim 4 model; an OpenSim 3 ground is a
        Body called ground with mass 0)."""
        return [b for b in self._objects("BodySet") if b.tag == "Body"]

    def body_names(self) -> list:
        """Ground first, then the bodies in file order."""
        names = [b.get("name", "") for b in self.bodies()]
        if self.v4:
            ground = _xml.child(self.model, "Ground")
            return [ground.get("name", "ground")] + names
        ground = next((n for n in names if n == "ground"), names[0] if names else "ground")
        return [ground] + [n for n in names if n != ground]

    def joints(self) -> list:
        """(joint element, parent body, child body) in file order."""
        if self.v4:
            reader = self._reader()
            out = []
            for j in self._objects("JointSet"):
                parent, _ = reader.frame_of_socket(j, ("socket_parent_frame", "socket_parent_frame_connectee_name"))
                child, _ = reader.frame_of_socket(j, ("socket_child_frame", "socket_child_frame_connectee_name"))
                out.append((j, parent, child))
            return out
        out = []
        for b in self.bodies():
            holder = _xml.child(b, "Joint")
            for j in ([] if holder is None else list(holder)):
                out.append((j, _xml.child_text(j, "parent_body"), b.get("name", "")))
        return out

    def frame_names(self) -> list:
        """The names of the model's physical frames in OpenSim's component order (the ScaleSet
        OpenSim writes lists them so): an OpenSim 4 model's Ground, Bodies and PhysicalOffsetFrames
        in document order (depth first); an OpenSim 3 model's ground and bodies, then the two
        frames OpenSim makes of each joint's offsets when it reads it (<parent>_offset,
        <child>_offset)."""
        if self.v4:
            return [f.get("name", "") for f in self.model.iter()
                    if f.tag in ("Ground", "Body", "PhysicalOffsetFrame")]
        offsets = [name for _, parent, child in self.joints() for name in (f"{parent}_offset", f"{child}_offset")]
        return self.body_names() + offsets

    def marker_elements(self) -> list:
        return [m for m in self._objects("MarkerSet") if m.tag == "Marker"]

    def marker_frames(self) -> dict:
        """{marker name: (body name, X (4x4) of the frame its location is given in, in the body)}."""
        reader = self._reader()
        out = {}
        for m in self.marker_elements():
            if self.v4:
                out[m.get("name", "")] = reader.frame_of_socket(m, ("socket_parent_frame",
                                                                    "socket_parent_frame_connectee_name"))
            else:
                out[m.get("name", "")] = (_xml.child_text(m, "body"), np.eye(4))
        return out

    def coordinate_elements(self) -> dict:
        return {c.get("name", ""): c for c in self.model.iter("Coordinate")}

    # ------------------------------------------------------------------------------- editing

    def set_name(self, name: str):
        self.model.set("name", name)

    def update_markers(self, entries) -> None:
        """OpenSim's Model::updateMarkerSet: each marker of `entries` replaces the model's marker
        of that name (which is removed) and is appended to the model's MarkerSet."""
        holder = _xml.child(self.model, "MarkerSet")
        if holder is None:
            holder = _xml.Element("MarkerSet", {"name": "markerset"})
            self.model.append(holder)
        objects = _xml.child(holder, "objects")
        if objects is None:
            objects = _xml.Element("objects")
            holder.append(objects)
        for entry in entries:
            for old in [m for m in objects if m.tag == "Marker" and m.get("name") == entry.name]:
                objects.remove(old)
            objects.append(self._marker_element(entry))

    def _marker_element(self, entry: MarkerEntry):
        marker = _xml.Element("Marker", {"name": entry.name})
        frame = entry.frame
        if self.v4:
            if "/" not in frame:                                 # a body name from an OpenSim 3 set
                ground = self.body_names()[0]
                frame = f"/{ground}" if frame == ground else f"/bodyset/{frame}"
            set_text(marker, "socket_parent_frame", frame)
        else:
            set_text(marker, "body", frame.rstrip("/").rsplit("/", 1)[-1])
        set_text(marker, "location", numbers(entry.location))
        set_text(marker, "fixed", "true" if entry.fixed else "false")
        marker.tail = "\n"
        return marker

    def delete_markers(self, names) -> list:
        """Remove the markers called `names`; returns the names removed, in model order."""
        holder = _xml.child(self.model, "MarkerSet")
        objects = None if holder is None else _xml.child(holder, "objects")
        removed = []
        for m in ([] if objects is None else list(objects)):
            if m.tag == "Marker" and m.get("name") in set(names):
                objects.remove(m)
                removed.append(m.get("name"))
        return removed

    def set_marker_location(self, name: str, location) -> None:
        for m in self.marker_elements():
            if m.get("name") == name:
                set_text(m, "location", numbers(location))
                return
        raise KeyError(f"no marker called {name!r}")

    def set_default_values(self, values: dict) -> None:
        """Coordinates' <default_value> (radians or metres) from {name: value}."""
        elements = self.coordinate_elements()
        for name, value in values.items():
            set_text(elements[name], "default_value", number(value))

    def write(self, path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        ET.ElementTree(self.root).write(path, encoding="UTF-8", xml_declaration=True)
        return path

    def write_marker_set(self, path) -> Path:
        """The model's MarkerSet as a MarkerSet file (OpenSim's output_marker_file)."""
        holder = _xml.child(self.model, "MarkerSet")
        document = ET.Element("OpenSimDocument", {"Version": self.root.get("Version", "40000")})
        document.text = "\n"
        document.append(copy_tree(holder) if holder is not None else ET.Element("MarkerSet"))
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        ET.ElementTree(document).write(path, encoding="UTF-8", xml_declaration=True)
        return path
