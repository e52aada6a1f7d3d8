"""The pieces of the ``agent-cli`` method: a throw-away workspace (:mod:`.workspace`), the
metering proxy and verify broker the CLI reaches over loopback (:mod:`.proxy`), the CLI's
process under its time limit (:mod:`.process`) and the readers of its own log (:mod:`.logs`)."""
