"""Real artefacts (issue 29): fluid 1.8 model-zoo networks exchanged with real Paddle 2.6."""
