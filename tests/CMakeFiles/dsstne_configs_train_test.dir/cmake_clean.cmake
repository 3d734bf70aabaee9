file(REMOVE_RECURSE
  "CMakeFiles/dsstne_configs_train_test.dir/engine/dsstne_configs_train_test.cpp.o"
  "CMakeFiles/dsstne_configs_train_test.dir/engine/dsstne_configs_train_test.cpp.o.d"
  "dsstne_configs_train_test"
  "dsstne_configs_train_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/dsstne_configs_train_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
