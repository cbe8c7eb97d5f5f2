# A unit for interp_units --unit (ctest bench_interp_units_probe): a read of a middle layer's
# output, as scripts/gpu/graph-state-probes writes its probes.
model = VLLM("bench")
with model.trace([273, 468, 3, 301, 21, 374, 7, 304, 279]):
    h = model.model.layers[14].output[0].save()
