"""`python -m tf_privpy.cluster`: the cluster tool (tf_privpy/deploy/cluster.py), kept
under the name operators type."""
from tf_privpy.deploy.cluster import run

if __name__ == "__main__":
    run()
