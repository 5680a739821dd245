"""The watch inside the page's server: ``deployments`` (the deployments of
``SPECSCOPE_WATCH_URLS`` scraped on a schedule, stored, exported and pushed) and ``charts``
(their figures over time); the pages and exports are app/routes/watch.py."""
