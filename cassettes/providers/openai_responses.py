from cassettes.providers._base import Provider


class OpenAIResponses(Provider):
    family = "openai_responses"

    def recognise(self, method, url, body):  # placeholder until the adapter lands
        return 0
