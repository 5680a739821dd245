"""The "Your traffic" panel: its state in the link (``state``), the probe job on the engine
queue (``job``), "Use these numbers" (``numbers``) and the pictures of a probe's result
(``charts``), drawn into the page's HTML (``render``)."""
