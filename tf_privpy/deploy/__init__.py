"""Deployment (DESIGN §2): the cluster tool and cluster file, the tf_privpy
server processes and the share service with its keys. Above the API: it
starts servers that run tf_privpy; nothing in the API imports it but
tp.init's distributed mode, for the cluster file."""
