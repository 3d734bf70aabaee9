# Empty dependencies file for sync_window_test.
# This may be replaced when dependencies are built.
