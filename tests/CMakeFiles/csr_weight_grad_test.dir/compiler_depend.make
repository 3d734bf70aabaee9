# Empty compiler generated dependencies file for csr_weight_grad_test.
# This may be replaced when dependencies are built.
