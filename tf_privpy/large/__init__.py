"""tp.LargeArray (issue 29): private matrices whose shares live on S1's and
S2's disks, each in its own server's folder, computed on block by block.

- blockfile.py: one share's file (header, rows), no TensorFlow;
- party.py: the ops S1 and S2 read and write their own files with, placed
  on their own devices, and the folders each process serves;
- stream.py: how a computation runs block by block;
- array.py: the LargeArray class (views, products, sums, element-wise ops);
- sharing.py: tp.share_to_disk, the data owner's streaming share;
- store_copy.py: LargeArray.from_store, each server copying its own share
  of a share-service upload from its store into its folder.

docs/large_arrays.md has the picture and the numbers.
"""
from tf_privpy.large.blockfile import LargeArrayError
from tf_privpy.large.array import LargeArray
from tf_privpy.large.sharing import share_to_disk

__all__ = ["LargeArray", "LargeArrayError", "share_to_disk"]
