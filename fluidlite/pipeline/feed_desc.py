"""``fluid.DataFeedDesc``: the data-feed description of ``fluid.dataset`` (protobuf text form).

Reads and writes the text form fluid used::

    name: "MultiSlotDataFeed"
    batch_size: 2
    multi_slot_desc {
        slots {
            name: "words"
            type: "uint64"
            is_dense: false
            is_used: true
        }
    }
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Sequence

__all__ = ["DataFeedDesc"]

_FIELD = re.compile(r'(\w+)\s*:\s*("(?:[^"\\]|\\.)*"|\S+)')


def _value(text: str) -> Any:
    if text.startswith('"'):
        return text[1:-1]
    if text in ("true", "false"):
        return text == "true"
    try:
        return int(text)
    except ValueError:
        return text


class DataFeedDesc:
    """A data-feed description: ``name``, ``batch_size`` and the slots (``name``, ``type``
    ``"uint64"`` or ``"float"``, ``is_dense``, ``is_used``).

    Args:
        proto_file (str | None): a file holding the protobuf text form to read the name, batch size,
            pipe command and slots from; None starts empty (``MultiSlotDataFeed``, batch size 1, no
            slots). Default None.

    Returns:
        DataFeedDesc: the description.

    Raises:
        OSError: ``proto_file`` cannot be opened (e.g. FileNotFoundError).
        UnicodeDecodeError: ``proto_file`` is not UTF-8 text.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> import os, tempfile
        >>> proto = os.path.join(tempfile.mkdtemp(), "data.proto")
        >>> with open(proto, "w") as f:
        ...     _ = f.write('''name: "MultiSlotDataFeed"
        ... batch_size: 2
        ... multi_slot_desc {
        ...     slots {
        ...         name: "words"
        ...         type: "uint64"
        ...         is_dense: false
        ...         is_used: true
        ...     }
        ...     slots {
        ...         name: "label"
        ...         type: "uint64"
        ...         is_dense: false
        ...         is_used: true
        ...     }
        ... }''')
        >>> desc = fluid.DataFeedDesc(proto)
        >>> desc.batch_size, [s["name"] for s in desc.slots]
        (2, ['words', 'label'])
    """

    def __init__(self, proto_file: Optional[str] = None) -> None:
        self.name = "MultiSlotDataFeed"
        self.batch_size = 1
        self.pipe_command = "cat"
        self.slots: List[Dict[str, Any]] = []
        if proto_file is not None:
            with open(proto_file, encoding="utf-8") as f:
                self._parse(f.read())

    def _parse(self, text: str) -> None:
        # the text form nests only multi_slot_desc { slots { ... } ... }: tokens in order
        slot: Optional[Dict[str, Any]] = None
        for line in text.splitlines():
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            if line.startswith("slots"):
                slot = {"name": "", "type": "uint64", "is_dense": False, "is_used": False}
                self.slots.append(slot)
                continue
            if line == "}":
                slot = None
                continue
            m = _FIELD.match(line)
            if m is None:
                continue
            key, val = m.group(1), _value(m.group(2))
            if slot is not None:
                slot[key] = val
            elif key in ("name", "batch_size", "pipe_command"):
                setattr(self, key, val)

    def _slot(self, name: str) -> Dict[str, Any]:
        for s in self.slots:
            if s["name"] == name:
                return s
        raise ValueError(f"DataFeedDesc: no slot named {name!r}; slots are "
                         f"{[s['name'] for s in self.slots]}")

    def set_batch_size(self, batch_size: int) -> None:
        """Samples per batch.

        Args:
            batch_size (int): samples per batch.

        Returns:
            None.

        Raises:
            ValueError: ``batch_size`` is a string that is not an integer.
            TypeError: ``batch_size`` is not a number.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> import os, tempfile
            >>> proto = os.path.join(tempfile.mkdtemp(), "data.proto")
            >>> with open(proto, "w") as f:
            ...     for line in ['name: "MultiSlotDataFeed"', 'batch_size: 2', 'multi_slot_desc {',
            ...                  '    slots {', '        name: "words"', '        type: "uint64"',
            ...                  '        is_dense: false', '        is_used: false', '    }',
            ...                  '    slots {', '        name: "label"', '        type: "uint64"',
            ...                  '        is_dense: false', '        is_used: false', '    }', '}']:
            ...         print(line, file=f)
            >>> desc = fluid.DataFeedDesc(proto)
            >>> desc.set_batch_size(128)
            >>> desc.batch_size
            128
        """
        self.batch_size = int(batch_size)

    def set_dense_slots(self, dense_slots_name: Sequence[str]) -> None:
        """Mark the named slots as dense (fixed-size) rather than variable-length.

        Args:
            dense_slots_name (Sequence[str]): names of slots to mark ``is_dense: true``.

        Returns:
            None.

        Raises:
            ValueError: a name is not a slot (the message lists the slots); the names before it are
                already marked.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> import os, tempfile
            >>> proto = os.path.join(tempfile.mkdtemp(), "data.proto")
            >>> with open(proto, "w") as f:
            ...     for line in ['name: "MultiSlotDataFeed"', 'batch_size: 2', 'multi_slot_desc {',
            ...                  '    slots {', '        name: "words"', '        type: "uint64"',
            ...                  '        is_dense: false', '        is_used: false', '    }',
            ...                  '    slots {', '        name: "label"', '        type: "uint64"',
            ...                  '        is_dense: false', '        is_used: false', '    }', '}']:
            ...         print(line, file=f)
            >>> desc = fluid.DataFeedDesc(proto)
            >>> desc.set_dense_slots(["label"])
            >>> [(s["name"], s["is_dense"]) for s in desc.slots]
            [('words', False), ('label', True)]
        """
        slots = [self._slot(n) for n in dense_slots_name]     # every name checked before any is marked
        for slot in slots:
            slot["is_dense"] = True

    def set_use_slots(self, use_slots_name: Sequence[str]) -> None:
        """Mark the named slots as used (ValueError naming the slots for an unknown name).

        Args:
            use_slots_name (Sequence[str]): names of slots to mark ``is_used: true``.

        Returns:
            None.

        Raises:
            ValueError: a name is not a slot (the message lists the slots); the names before it are
                already marked.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> import os, tempfile
            >>> proto = os.path.join(tempfile.mkdtemp(), "data.proto")
            >>> with open(proto, "w") as f:
            ...     for line in ['name: "MultiSlotDataFeed"', 'batch_size: 2', 'multi_slot_desc {',
            ...                  '    slots {', '        name: "words"', '        type: "uint64"',
            ...                  '        is_dense: false', '        is_used: false', '    }',
            ...                  '    slots {', '        name: "label"', '        type: "uint64"',
            ...                  '        is_dense: false', '        is_used: false', '    }', '}']:
            ...         print(line, file=f)
            >>> desc = fluid.DataFeedDesc(proto)
            >>> desc.set_use_slots(["words"])
            >>> [(s["name"], s["is_used"]) for s in desc.slots]
            [('words', True), ('label', False)]
        """
        slots = [self._slot(n) for n in use_slots_name]     # every name checked before any is marked
        for slot in slots:
            slot["is_used"] = True

    def desc(self) -> str:
        """The protobuf text form.

        Args:
            None: this method takes no arguments.

        Returns:
            str: the protobuf text form (``name``, ``batch_size``, ``pipe_command`` when not
            ``cat``, and one ``slots`` block per slot), ending with a newline.

        Raises:
            None: this method does not raise.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> import os, tempfile
            >>> proto = os.path.join(tempfile.mkdtemp(), "data.proto")
            >>> with open(proto, "w") as f:
            ...     for line in ['name: "MultiSlotDataFeed"', 'batch_size: 2', 'multi_slot_desc {',
            ...                  '    slots {', '        name: "words"', '        type: "uint64"',
            ...                  '        is_dense: false', '        is_used: false', '    }',
            ...                  '    slots {', '        name: "label"', '        type: "uint64"',
            ...                  '        is_dense: false', '        is_used: false', '    }', '}']:
            ...         print(line, file=f)
            >>> desc = fluid.DataFeedDesc(proto)
            >>> print(desc.desc())     # doctest: +ELLIPSIS
            name: "MultiSlotDataFeed"
            batch_size: 2
            multi_slot_desc {
                slots {
                    name: "words"
                    type: "uint64"
                    is_dense: false
                    is_used: false
                }
                slots {
                    name: "label"
                    type: "uint64"
                    is_dense: false
                    is_used: false
                }
            }
        """
        lines = [f'name: "{self.name}"', f"batch_size: {self.batch_size}"]
        if self.pipe_command != "cat":
            lines.append(f'pipe_command: "{self.pipe_command}"')
        lines.append("multi_slot_desc {")
        for s in self.slots:
            lines += ["    slots {", f'        name: "{s["name"]}"',
                      f'        type: "{s["type"]}"',
                      f'        is_dense: {str(bool(s["is_dense"])).lower()}',
                      f'        is_used: {str(bool(s["is_used"])).lower()}', "    }"]
        lines.append("}")
        return "\n".join(lines) + "\n"
