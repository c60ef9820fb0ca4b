"""Reading a dump: the tensor table, .bin files, the tree's layout, the manifest."""
