"""accelbench: does the GPU pay off for this workload, and by how much?

The package holds everything the Snakemake workflow calls: the experiment grid,
device parsing, honest timing, the result record, the kernel and model
registries, and the analysis that turns records into tables and figures.
"""

__version__ = "0.1.0"
