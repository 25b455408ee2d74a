"""The data owners' share service (issue 12).

S1 and S2 each run a gRPC service over TLS with client certificates
(server.py); data owners upload one additive share of an array to each and
fetch both shares of their results to reconstruct them on their own machine
(client.py). ca.py makes the cluster's small CA and the certificates;
store.py keeps the records durably. The stubs of share_service.proto are
generated at build time (protogen.py).
"""
