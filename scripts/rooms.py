#!/usr/bin/env python3
"""The daemon's rooms as the code includes them.

activator/daemon/ is split into rooms (sub-folders) stacked in layers; a
room may include the headers of the rooms below it and never of one above
or beside it. This reads every #include "activator/daemon/..." of the
daemon's files (and those of the libraries, which must include none),
draws the rooms with the arrows between them, and with --check fails on
every include that runs up or sideways.

    scripts/rooms.py            draws the rooms (what docs/layers.md shows)
    scripts/rooms.py --check    exits 1, naming each file and include at fault

The layers, from the top down, are those of activator/daemon/meson.build
(`daemon_layers`): rooms on one line share a layer and may not include each
other.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DAEMON = 'activator/daemon'
INCLUDE = re.compile(r'^\s*#\s*include\s+"activator/daemon/([a-z_]+)/[^"]+"', re.M)
LIBRARIES = ['common', 'cgroup', 'release', 'checkpoint', 'claims', 'activator']


def layers():
    """The rooms by layer, top first, from activator/daemon/meson.build."""
    text = open(os.path.join(ROOT, DAEMON, 'meson.build')).read()
    block = re.search(r'daemon_layers\s*=\s*\[(.*?)\n\]', text, re.S)
    if not block:
        sys.exit('rooms: no daemon_layers in %s/meson.build' % DAEMON)
    return [re.findall(r"'([a-z_]+)'", line)
            for line in block.group(1).splitlines() if re.search(r"'[a-z_]+'", line)]


def sources(top):
    for folder, _, names in sorted(os.walk(os.path.join(ROOT, top))):
        for name in sorted(names):
            if name.endswith(('.c', '.h')):
                path = os.path.join(folder, name)
                yield os.path.relpath(path, ROOT), open(path).read()


def room_of(path):
    parts = path.split('/')
    return parts[2] if len(parts) > 3 and path.startswith(DAEMON + '/') else None


def main():
    check = '--check' in sys.argv[1:]
    stack = layers()
    rank = {room: len(stack) - i for i, line in enumerate(stack) for room in line}
    arrows = {}  # (from, to) -> files
    faults = []
    for top in LIBRARIES:
        for path, text in sources(top):
            room = room_of(path)
            for target in INCLUDE.findall(text):
                if room is None:
                    if not path.startswith(DAEMON + '/'):
                        faults.append('%s includes the daemon (%s/): the libraries know no '
                                      'daemon' % (path, target))
                    continue
                if room not in rank or target not in rank:
                    unknown = room if room not in rank else target
                    faults.append('%s: room %s is not in daemon_layers (%s/meson.build)'
                                  % (path, unknown, DAEMON))
                    continue
                if target == room:
                    continue
                arrows.setdefault((room, target), set()).add(path)
                if rank[target] >= rank[room]:
                    way = 'up' if rank[target] > rank[room] else 'sideways'
                    faults.append('%s includes %s/, a room %s of %s/' % (path, target, way, room))
    if check:
        for fault in sorted(set(faults)):
            print('rooms: ' + fault, file=sys.stderr)
        print('rooms: %d rooms, %d arrows between them, %d running up or sideways'
              % (len(rank), len(arrows), len(set(faults))))
        return 1 if faults else 0
    for i, line in enumerate(stack):
        for room in line:
            below = sorted({t for (f, t) in arrows if f == room}, key=lambda r: -rank[r])
            print('%-13s -> %s' % (room + '/', ', '.join(r + '/' for r in below) or '(nothing)'))
        if i + 1 < len(stack):
            print('%-13s    |' % '')
    return 0


if __name__ == '__main__':
    sys.exit(main())
