#!/usr/bin/env python3
"""Writes one container image as an archive that `ctr images import`, `docker load` and
`kind load image-archive` all read, from files on disk: no registry, no daemon, no base image.

The archive is an OCI image layout (oci-layout, index.json, blobs/sha256/...) that also carries the
`manifest.json` `docker load` reads, the way `docker save` writes both. One uncompressed layer, so a
layer's digest is its diff ID; every byte is a function of the inputs (sorted entries, mtime 0, owner 0),
so the same binaries give the same image digest.

Usage:
  scripts/oci-image.py --out IMAGE.tar --name REPO:TAG --entrypoint /confgate [--cmd run]
      [--user 65532:65532] [--env K=V]... [--port 9797] [--label K=V]...
      SRC=/DEST[:MODE]...
A SRC that is a dynamically linked executable is copied as given: build static binaries, or add their
libraries as further SRC=/DEST pairs (the node suite does so for a distribution's programs).
"""
import argparse
import hashlib
import io
import json
import os
import sys
import tarfile


def layer_bytes(files):
    buf = io.BytesIO()
    dirs = set()
    for _, dest, _ in files:
        parts = dest.strip("/").split("/")[:-1]
        for i in range(1, len(parts) + 1):
            dirs.add("/".join(parts[:i]))
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        entries = [(d, None, 0o755) for d in dirs] + [(dest.strip("/"), src, mode) for src, dest, mode in files]
        for name, src, mode in sorted(entries, key=lambda e: e[0]):
            info = tarfile.TarInfo(name)
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mode = mode
            if src is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                with open(src, "rb") as f:
                    data = f.read()
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--name", required=True, help="REPO:TAG, e.g. localhost/confgate/confgate:0.1.0")
    p.add_argument("--entrypoint", required=True, action="append")
    p.add_argument("--cmd", action="append", default=[])
    p.add_argument("--user", default="65532:65532")
    p.add_argument("--env", action="append", default=[])
    p.add_argument("--port", action="append", default=[])
    p.add_argument("--label", action="append", default=[])
    p.add_argument("files", nargs="+", metavar="SRC=/DEST[:MODE]")
    a = p.parse_args()

    repo, sep, tag = a.name.rpartition(":")
    if not sep or "/" in tag or not repo:
        sys.exit(f"oci-image: --name {a.name!r} is not REPO:TAG")
    files = []
    for spec in a.files:
        src, sep, dest = spec.partition("=")
        if not sep or not dest.startswith("/"):
            sys.exit(f"oci-image: {spec!r} is not SRC=/DEST[:MODE]")
        mode = None
        if ":" in dest:
            dest, m = dest.rsplit(":", 1)
            mode = int(m, 8)
        if not os.path.isfile(src):
            sys.exit(f"oci-image: {src} is not a file")
        if mode is None:
            mode = 0o755 if os.access(src, os.X_OK) else 0o644
        files.append((src, dest, mode))

    blobs = {}

    def blob(data):
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        blobs[digest] = data
        return {"digest": digest, "size": len(data)}

    def canon(obj):
        return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()

    layer = blob(layer_bytes(files))
    labels = dict(kv.split("=", 1) for kv in a.label)
    config = {
        "architecture": {"x86_64": "amd64", "aarch64": "arm64"}.get(os.uname().machine, os.uname().machine),
        "os": "linux",
        "config": {
            "User": a.user,
            "Entrypoint": a.entrypoint,
            "Cmd": a.cmd or None,
            "Env": a.env or None,
            "ExposedPorts": {f"{port}/tcp": {} for port in a.port} or None,
            "Labels": labels or None,
        },
        "rootfs": {"type": "layers", "diff_ids": [layer["digest"]]},
        "history": [{"created_by": "scripts/oci-image.py"}],
    }
    config["config"] = {k: v for k, v in config["config"].items() if v is not None}
    cfg = blob(canon(config))
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **cfg},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", **layer}],
    }
    man = blob(canon(manifest))
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            **man,
            "annotations": {"io.containerd.image.name": a.name, "org.opencontainers.image.ref.name": tag},
        }],
    }
    docker = [{
        "Config": "blobs/sha256/" + cfg["digest"][7:],
        "RepoTags": [a.name],
        "Layers": ["blobs/sha256/" + layer["digest"][7:]],
    }]
    top = [
        ("oci-layout", canon({"imageLayoutVersion": "1.0.0"})),
        ("index.json", canon(index)),
        ("manifest.json", canon(docker)),
    ] + [("blobs/sha256/" + d[7:], data) for d, data in sorted(blobs.items())]

    tmp = a.out + ".tmp"
    with tarfile.open(tmp, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for d in ("blobs", "blobs/sha256"):
            info = tarfile.TarInfo(d)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 0
            tar.addfile(info)
        for name, data in top:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    os.replace(tmp, a.out)
    print(f"{a.out}: {a.name} {man['digest']} ({os.path.getsize(a.out)} bytes)")


if __name__ == "__main__":
    main()
