"""Several ranks: one report from every rank of a torch.distributed job.

``distributed`` gathers each rank's report on rank 0 (``xfer.report(
all_ranks=True)``); ``merging`` adds the rank files of one run into per-site
totals with per-rank columns. Above the report, below runs.
"""
