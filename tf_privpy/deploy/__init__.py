"""Deployment (DESIGN §2): the cluster tool and cluster file, the tf_privpy
server processes and the share service with its keys. The API reaches in
for the cluster file (tp.init's distributed mode, tp.profile), the share
store (tp.load, tp.publish on the servers) and tp.client (data owners)."""
