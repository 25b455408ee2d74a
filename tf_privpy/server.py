"""`python -m tf_privpy.server`: a tf_privpy server (tf_privpy/deploy/server.py), kept
under the name operators type."""
from tf_privpy.deploy.server import run

if __name__ == "__main__":
    run()
