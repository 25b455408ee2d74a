"""The share service's key commands of `python -m tf_privpy.cluster` (cluster.py
parses the flags): each makes or uses keys in the folder of the machine it
runs on, so no private key is made or kept anywhere but where it is used
(tf_privpy/deploy/service/ca.py, docs/share_service.md).
"""
from __future__ import annotations

import json
import os
import shutil
import sys
from typing import Mapping, Optional

from tf_privpy.deploy import cluster_file as cf
from tf_privpy.deploy.cluster_file import ClusterError


def _say(msg: str) -> None:
    print(f"tf_privpy cluster: {msg}", file=sys.stderr, flush=True)


def _owner_settings(paths: Mapping[str, str], name: str, cluster_path: Optional[str]) -> str:
    """Writes NAME.json beside the owner's certificate: tp.client's settings
    (paths relative to it, and the services' addresses from the cluster file)."""
    base = os.path.dirname(paths["cert"])
    settings = {k: os.path.relpath(paths[k], base) for k in ("ca", "cert", "key")}
    if cluster_path and os.path.exists(cluster_path):
        settings["share_services"] = dict(cf.load(cluster_path).share_services)
    out = os.path.join(base, f"{name}.json")
    with open(out, "w") as f:
        json.dump(settings, f, indent=2)
    return out


def run_owner_key(name: str, owner_dir: str, ca_pem: Optional[str],
                  cluster_path: Optional[str], overwrite: bool = False) -> int:
    """`owner-key NAME`: on the owner's machine, its key, certificate and settings."""
    from tf_privpy.deploy.service import ca
    try:
        made = ca.owner_key(owner_dir, name, ca_pem, overwrite)
        out = _owner_settings(made, name, cluster_path)
    except (OSError, ValueError) as e:
        _say(f"error: {e}")
        return 1
    need_ca = "" if os.path.exists(made["ca"]) else (
        f" Put the cluster's ca.pem at {made['ca']} (it checks S1's and S2's certificates).")
    print(f"made {name}'s key {made['key']} (mode 0600: it never leaves this machine) and "
          f"certificate {made['cert']}; settings {out}.{need_ca}\nSend {made['cert']} to the "
          f"operators of S1 and S2, and read each of them this key fingerprint over another "
          f"channel (phone, in person):\n{made['fingerprint']}")
    return 0


def run_enrol(cert: str, server_dir: str, fingerprint: Optional[str],
              overwrite: bool = False) -> int:
    """`enrol NAME.pem`: on a server's machine, lets that owner log in there."""
    from tf_privpy.deploy.service import ca
    if not fingerprint:
        _say("error: enrol needs --fingerprint HEX: the key fingerprint the owner read to "
             "you over another channel than the one that brought the certificate")
        return 2
    try:
        name, fp = ca.enrol(server_dir, cert, fingerprint, overwrite)
    except (OSError, ValueError) as e:
        _say(f"error: {e}")
        return 1
    print(f"enrolled {name} (key {fp}) in {server_dir}: this server's share service accepts "
          f"it from its next connection; the other server needs its own enrol")
    return 0


def run_revoke(name: str, server_dir: str) -> int:
    """`revoke NAME`: on a server's machine, removes that owner's enrolment."""
    from tf_privpy.deploy.service import ca
    try:
        fp = ca.revoke(server_dir, name)
    except (OSError, ValueError) as e:
        _say(f"error: {e}")
        return 1
    print(f"revoked {name} (key {fp}) in {server_dir}: this server's share service refuses it "
          "from the next call; revoke it on the other server too")
    return 0


def run_server_key(role: Optional[str], server_dir: str, overwrite: bool = False) -> int:
    """`server-key --role s1`: on S1's or S2's machine, its TLS key and request."""
    from tf_privpy.deploy.service import ca
    if role not in ca.SERVER_ROLES:
        _say("error: server-key needs --role s1 or --role s2")
        return 2
    try:
        csr = ca.server_key(server_dir, role, overwrite)
    except (OSError, ValueError) as e:
        _say(f"error: {e}")
        return 1
    print(f"made {os.path.join(server_dir, role + '.key')} (mode 0600: it never leaves this "
          f"machine) and the request {csr}: carry the request to the CA machine "
          f"(sign-server), and the {role}.pem it returns back into {server_dir}")
    return 0


def run_sign_server(csr: str, role: Optional[str], ca_dir: str, hosts, cluster_path: Optional[str]
                    ) -> int:
    """`sign-server ROLE.csr --role ROLE`: on the CA machine, the server's certificate."""
    from tf_privpy.deploy.service import ca
    if role not in ca.SERVER_ROLES:
        _say("error: sign-server needs --role s1 or --role s2")
        return 2
    hosts = list(hosts or [])
    if not hosts and cluster_path and os.path.exists(cluster_path):
        c = cf.load(cluster_path)
        hosts = [cf.parse_address(c.share_services.get(role) or c.tasks[role])[0]]
    try:
        out = ca.sign_server(ca_dir, csr, role, hosts or ca.DEFAULT_HOSTS)
    except (OSError, ValueError, ClusterError) as e:
        _say(f"error: {e}")
        return 1
    print(f"signed {out} for {ca.server_name(role)} and {', '.join(hosts or ca.DEFAULT_HOSTS)}: "
          f"copy it into {role.upper()}'s folder (beside {role}.key)")
    return 0


def run_issue_cert(name: str, root: str, cluster_path: Optional[str]) -> int:
    """`issue-cert NAME`: only in `local`'s one-machine tree, the owner's key in
    its folder there, enrolled with both servers, and its settings."""
    from tf_privpy.deploy.service import ca
    if not ca.is_local_tree(root):
        _say(f"error: {root} is not a `cluster local` tree ({ca.LOCAL_MARKER}). With real "
             "machines an owner makes its own key (owner-key NAME on its machine) and each "
             "server's operator enrols it (enrol NAME.pem on S1's and on S2's machine): see "
             "docs/share_service.md")
        return 2
    try:
        paths = ca.local_owner(root, name)
        out = _owner_settings(paths, name, cluster_path)
    except (OSError, ValueError) as e:
        _say(f"error: {e}")
        return 1
    print(f"{name}'s key and certificate in {os.path.dirname(paths['cert'])}, enrolled with S1 "
          f"and S2 (one-machine tree: for trying things only); settings {out}: "
          f"tp.client.upload(NAME, array, cluster={out!r})")
    return 0


def lay_out_certs(certs: str, cluster_path: str) -> int:
    """`new --certs DIR`: the CA here (DIR/ca), and the public start of each
    server's folder and of an owner's folder; no server's or owner's key."""
    from tf_privpy.deploy.service import ca
    dirs = {"ca": os.path.join(certs, "ca"), "owner": os.path.join(certs, "owner")}
    try:
        ca_pem = ca.make_ca(dirs["ca"])
        for role in ca.SERVER_ROLES:
            dirs[role] = os.path.join(certs, role)
            ca.init_server_dir(dirs[role])
        os.makedirs(dirs["owner"], exist_ok=True)
        shutil.copyfile(ca_pem, os.path.join(dirs["owner"], "ca.pem"))
        shutil.copyfile(cluster_path, os.path.join(dirs["owner"], "cluster.json"))
    except (OSError, ValueError) as e:
        _say(f"error: {e}")
        return 1
    m = "python -m tf_privpy.cluster"
    print(f"""made the cluster CA in {dirs['ca']} and the folders to hand out:
  {dirs['ca']}: stays on THIS machine (the CA machine; not S1's or S2's): ca.key signs
      only the servers' TLS certificates.
  {dirs['s1']} -> S1's machine, {dirs['s2']} -> S2's machine (each server's share-service
      folder, --cert_dir): on each, {m} server-key --role s1 --certs s1 (s2 on S2),
      carry s1.csr here: {m} sign-server s1.csr --role s1 --certs {dirs['ca']} --cluster
      {cluster_path}, carry s1.pem back into s1/. Then python -m tf_privpy.server --role s1
      --cluster cluster.json --share_port PORT --cert_dir s1 --share_store STORE.
  {dirs['owner']} -> each data owner's machine (ca.pem, cluster.json): there,
      {m} owner-key NAME --certs owner --cluster owner/cluster.json; the owner sends
      NAME.pem to S1's and S2's operators and reads them the fingerprint it printed; each
      operator runs {m} enrol NAME.pem --certs s1 --fingerprint HEX (s2 on S2).""")
    return 0
