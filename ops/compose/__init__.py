"""A one-host Compose deployment (deploy/compose): ``python -m ops.compose generate STATE`` renders its state folder
(configuration, TLS material, generated secrets, data folders, env files); ``python -m ops.compose init`` is its
one-shot job (the broker's SCRAM user and the platform's topics). See docs/deploy.md."""
