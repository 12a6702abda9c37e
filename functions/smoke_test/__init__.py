"""The SmokeTest function: invokes the new endpoint with the recipe's sample request and checks the answer."""
