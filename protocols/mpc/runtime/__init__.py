"""The four-server runtime (DESIGN §2-4): parties and devices, the one channel,
keying and sealing, placement and its trace-time guard, the runtime handle,
the kernel wrappers, share-wise ring arithmetic and the cost type."""
