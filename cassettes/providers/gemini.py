from cassettes.providers._base import Provider


class Gemini(Provider):
    family = "gemini"

    def recognise(self, method, url, body):  # placeholder until the adapter lands
        return 0
