"""The bitwise comparison family (issue 26): a sibling of privpy/'s garbled circuits."""
