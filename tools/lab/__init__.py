"""The lab: noise studies and experiments behind the harness's choices, not the product."""
