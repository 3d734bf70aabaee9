file(REMOVE_RECURSE
  "libsparsenet_test_support.a"
)
