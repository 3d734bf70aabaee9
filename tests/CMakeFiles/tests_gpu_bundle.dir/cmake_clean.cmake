
# Per-language clean rules from dependency scanning.
foreach(lang )
  include(CMakeFiles/tests_gpu_bundle.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
